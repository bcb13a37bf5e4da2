"""Fixtures every test folder may use: they live in the tests._support package."""

from __future__ import annotations

pytest_plugins = ["tests._support.fixtures"]
