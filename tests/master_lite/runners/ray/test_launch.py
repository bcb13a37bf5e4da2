"""How a Ray trial is launched, without a cluster: its argv on the node, the runtime_env
setting, the node's environment, and the token-auth hint of a failed connection."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from master_lite.runners.ray import _actor, _launch


def test_python3_is_marked_for_the_node_to_replace(tmp_path: Path) -> None:
    assert _launch.node_argv(["python3", "train.py"], tmp_path) == (["python3", "train.py"], 0)
    assert _launch.node_argv(["bash", "run.sh"], tmp_path) == (["bash", "run.sh"], None)
    (tmp_path / "startup-hook.sh").write_text("export X=1\n")
    argv, at = _launch.node_argv(["python3", "train.py"], tmp_path)
    assert at is not None and argv[at:] == ["python3", "train.py"] and argv[1] == "-c"


def test_the_node_environment_is_the_workers_without_det_or_the_ray_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NODE_ONLY", "kept")
    monkeypatch.setenv("DET_MASTER", "http://stale:1")
    monkeypatch.setenv("DET_LATEST_CHECKPOINT", "stale")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "secret")
    env = _actor.node_environment({"DET_MASTER": "http://master:8080", "FROM_CONFIG": "1"})
    assert env["NODE_ONLY"] == "kept" and env["FROM_CONFIG"] == "1"
    assert env["DET_MASTER"] == "http://master:8080"
    assert "DET_LATEST_CHECKPOINT" not in env and "RAY_AUTH_TOKEN" not in env
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)


def test_the_runtime_env_setting_is_checked_by_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_launch.RUNTIME_ENV_ENV, raising=False)
    assert _launch.runtime_env_setting() is None
    monkeypatch.setenv(_launch.RUNTIME_ENV_ENV, '{"py_executable": "/opt/venv/bin/python"}')
    assert _launch.runtime_env_setting() == {"py_executable": "/opt/venv/bin/python"}
    monkeypatch.setenv(_launch.RUNTIME_ENV_ENV, "[1]")
    with pytest.raises(ValueError, match=r"MASTER_LITE_RAY_RUNTIME_ENV must be a JSON object"):
        _launch.runtime_env_setting()
    monkeypatch.setenv(_launch.RUNTIME_ENV_ENV, '{"pip": 5}')
    with pytest.raises(ValueError, match=r"MASTER_LITE_RAY_RUNTIME_ENV is not a Ray runtime_env"):
        _launch.runtime_env_setting()


def test_a_failed_connection_without_a_token_mode_mentions_token_auth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert "RAY_AUTH_MODE=token" in _launch.auth_hint()
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert _launch.auth_hint() == ""
