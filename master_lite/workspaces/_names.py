"""Checks of workspace and project names, descriptions and keys (each error names the field,
the rule and what to do)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from master_lite import errors

MAX_NAME = 128
MAX_DESCRIPTION = 10_000
# Determined's project keys: letters and digits, at most 5, stored upper-case.
_KEY = re.compile(r"^[A-Za-z0-9]{1,5}$")


def check_name(value: Any, what: str) -> str:
    """A valid workspace or project name (`what`: "workspace"/"project")."""
    if not isinstance(value, str) or not value.strip():
        raise errors.InvalidRequest(f"name: give the {what} a name (non-empty text)")
    if len(value) > MAX_NAME or any(ord(c) < 32 for c in value):
        raise errors.InvalidRequest(
            f"name {value[:40]!r}: a {what} name is at most {MAX_NAME} printable characters"
        )
    return value.strip()


def check_description(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION or "\x00" in value:
        raise errors.InvalidRequest(
            f"description: expected text of at most {MAX_DESCRIPTION} characters"
        )
    return value


def check_key(value: Any) -> str:
    if not isinstance(value, str) or not _KEY.match(value):
        raise errors.InvalidRequest(
            f"key {value!r}: a project key is 1 to 5 letters or digits (e.g. 'NLP')"
        )
    return value.upper()


def new_key(name: str, taken: Callable[[str], bool]) -> str:
    """A free key made from the project's name: its first letters and digits, upper-case,
    with a number when that is taken (as Determined makes one when none is given)."""
    stem = "".join(c for c in name.upper() if c.isascii() and c.isalnum())[:5] or "PROJ"
    if not taken(stem):
        return stem
    for number in range(1, 100_000):
        suffix = str(number)
        candidate = stem[: 5 - len(suffix)] + suffix
        if not taken(candidate):
            return candidate
    raise errors.Conflict(f"no free project key for {name!r}: give one (--key)")


__all__ = ["check_description", "check_key", "check_name", "new_key"]
