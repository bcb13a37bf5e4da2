"""A master hosted in jupyter_server with MasterLite.advertised_url (issue 31 row 1): trials
get the advertised URL, master.json names it for other machines and keeps the server's own
URL for clients on this host."""

from __future__ import annotations

import json
import socket

import pytest

from tests._support.hosted import hosted_server_config, start_hosted

pytest_plugins = ["pytest_jupyter.jupyter_server"]

ADVERTISED = "http://jupyter-head.example:8888/determined"


@pytest.fixture
def jp_server_config(tmp_path, monkeypatch):
    config = hosted_server_config(tmp_path, monkeypatch, cpu_slots=1)
    config["MasterLite"]["advertised_url"] = ADVERTISED
    return config


def test_the_hosted_master_advertises_the_configured_url(jp_serverapp, jp_asyncio_loop, tmp_path):
    extension = start_hosted(jp_serverapp, jp_asyncio_loop)
    info = json.loads((tmp_path / "det-root" / "master.json").read_text())
    assert info["url"] == ADVERTISED
    assert info["local_url"] == extension.master_url and info["hostname"] == socket.gethostname()
    assert extension.master.runs._master_url == ADVERTISED  # every trial's DET_MASTER
