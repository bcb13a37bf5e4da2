"""No master reachable: the error says what was tried and what to do, and comes quickly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from determined.cli.main import main
from determined.common import api


@pytest.fixture
def environment(monkeypatch, tmp_path):
    for name in (
        "DET_MASTER",
        "DET_MASTER_ADDR",
        "DET_MASTER_TOKEN",
        "DET_SESSION_TOKEN",
        "DET_DEBUG",
    ):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "root"
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(root))
    return root


def test_a_refused_det_master_names_the_variable_the_file_and_the_fix(
    environment, monkeypatch, refused_port, connect_backoff
):
    url = f"http://127.0.0.1:{refused_port}"
    monkeypatch.setenv("DET_MASTER", url)
    session = api.connect(interactive=True)
    with pytest.raises(api.MasterUnreachable) as raised:
        session.get("/experiments")
    # Someone is waiting: two quick retries (a master that is just restarting), well under 1 s.
    assert len(connect_backoff) == 2 and sum(connect_backoff) < 1, connect_backoff
    message = str(raised.value)
    assert raised.value.status == 0 and isinstance(raised.value, api.APIError)
    lines = message.splitlines()
    assert lines[0] == f"cannot reach the master at {url}: [Errno 111] Connection refused"
    assert f"  DET_MASTER={url}" in lines
    assert f"  {environment / 'master.json'}: not found" in lines
    assert (
        lines[-1].startswith("to fix:") and "master-lite" in lines[-1] and "JupyterLab" in lines[-1]
    )


def test_a_stale_master_file_says_its_master_is_gone(environment, refused_port):
    environment.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    url = f"http://127.0.0.1:{refused_port}"
    (environment / "master.json").write_text(
        json.dumps({"url": url, "token": "t", "pid": gone.pid})
    )
    with pytest.raises(api.MasterUnreachable) as raised:
        api.connect(interactive=True).get("/experiments")
    message = str(raised.value)
    assert "  DET_MASTER: not set" in message.splitlines()
    assert (
        f"master.json: names {url} (written by process {gone.pid}, which is no longer "
        "running" in message
    )


def test_without_any_master_the_error_lists_what_was_looked_at(environment):
    with pytest.raises(api.MasterNotFound) as raised:
        api.connect(interactive=True)
    assert str(raised.value).splitlines()[:3] == [
        "no master found; looked at:",
        "  DET_MASTER: not set",
        f"  {environment / 'master.json'}: not found",
    ]


def test_det_cli_reports_an_unreachable_master_quickly(
    environment, monkeypatch, capsys, refused_port, connect_backoff
):
    url = f"http://127.0.0.1:{refused_port}"
    monkeypatch.setenv("DET_MASTER", url)
    assert main(["e", "list"]) == 1
    assert len(connect_backoff) == 2 and sum(connect_backoff) < 1, connect_backoff
    err = capsys.readouterr().err
    assert err.startswith(
        f"Error: cannot reach the master at {url}: [Errno 111] Connection refused"
    )
    assert f"DET_MASTER={url}" in err and "master-lite" in err and "Traceback" not in err


def test_non_interactive_sessions_keep_retrying_longer(
    environment, monkeypatch, refused_port, connect_backoff
):
    """Trials (and other background clients) ride out a master restart of a few seconds."""
    monkeypatch.setenv("DET_MASTER", f"http://127.0.0.1:{refused_port}")
    with pytest.raises(api.MasterUnreachable):
        api.connect().get("/experiments")
    assert len(connect_backoff) == 5 and sum(connect_backoff) > 3, connect_backoff
