"""The MasterLite app and the `master-lite` command: settings, master.json, start and stop."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest
import requests
from traitlets import TraitError

from master_lite import _cli
from master_lite._app import MasterLite, MasterLiteStartError
from master_lite._core._auth import UserPrincipal
from master_lite._core._events import EventBus
from tests._support import child_env, tar_gz, wait_until


class LifecycleFakeMaster:
    """Just enough facade for the app: a token, start/stop, and GET /master."""

    def __init__(self, root_dir: Path) -> None:
        self.user_token = "app-test-token"
        self.root_dir = root_dir
        self.cluster_id = "fake-cluster"
        self.events = EventBus()
        # The users part as the API asks it: no JupyterHub, everyone reads everything.
        self.users = types.SimpleNamespace(hub=None, read_access="all")
        self.started_with: str | None = None
        self.stopped_with: dict | None = None

    def authenticate(self, token: str) -> UserPrincipal | None:
        return UserPrincipal() if token == self.user_token else None

    async def start(self, master_url: str) -> None:
        self.started_with = master_url

    async def stop(self, pause_running: bool = True) -> None:
        self.stopped_with = {"pause_running": pause_running}


# --- settings -------------------------------------------------------------------------------


def test_every_setting_is_a_documented_config_trait() -> None:
    traits = MasterLite.class_traits(config=True)
    assert set(traits) == {
        "root_dir",
        "cpu_slots",
        "resource_manager",
        "ray_address",
        "runner_class",
        "process_runner_class",
        "container_runner_class",
        "kernel_runner_class",
        "ray_runner_class",
        "container_runtime",
        "determined_images_fallback",
        "context_size_limit",
        "checkpoint_storage_roots",
        "preemption_grace_seconds",
        "tensorboard_refresh_seconds",
        "kernel_gateway_url",
        "kernel_gateway_token",
        "kernel_gateway_master_url",
        "kernel_gateway_files_limit",
        "host",
        "port",
        "advertised_url",
        "run_trials_as",
        "fallback_unix_user",
        "trial_python",
        "read_access",
        "session_lifetime_hours",
        # Scheduling (master_lite/_app/_scheduling.py, docs/scheduling.md).
        "scheduler",
        "preemption",
        "scheduler_min_run_seconds",
        "max_slots_per_user",
        "user_max_slots",
        "slot_hours_per_day",
        "user_slot_hours_per_day",
        "user_weights",
        "resource_pools",
        "default_resource_pool",
    }
    for name, trait in traits.items():
        assert trait.help, name
        assert "MASTER_LITE_" in trait.help, name


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("MASTER_LITE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    app = MasterLite()
    assert app.root_dir == str(tmp_path / "data" / "determined")
    assert (app.cpu_slots, app.resource_manager, app.host, app.port) == (
        2,
        "local",
        "127.0.0.1",
        8080,
    )
    assert app.context_size_limit == 96 * 1024 * 1024
    assert app.preemption_grace_seconds == 30.0
    assert app.tensorboard_refresh_seconds == 5.0
    assert app.container_runtime == "podman"  # installed by `make test-deps`


def test_environment_variables_set_defaults_and_config_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path))
    monkeypatch.setenv("MASTER_LITE_PORT", "9123")
    monkeypatch.setenv("MASTER_LITE_CPU_SLOTS", "5")
    monkeypatch.setenv("MASTER_LITE_PREEMPTION_GRACE_SECONDS", "2.5")
    monkeypatch.setenv("MASTER_LITE_TENSORBOARD_REFRESH_SECONDS", "0.5")
    monkeypatch.setenv("MASTER_LITE_CONTAINER_RUNTIME", "/opt/bin/docker")
    app = MasterLite()
    assert app.tensorboard_refresh_seconds == 0.5
    assert app.build_master().tensorboards.refresh_seconds == 0.5
    assert (app.root_dir, app.port, app.cpu_slots) == (str(tmp_path), 9123, 5)
    assert app.container_runtime == "/opt/bin/docker"
    assert app.preemption_grace_seconds == 2.5
    assert MasterLite(port=7000).port == 7000


def test_checkpoint_storage_roots_reach_the_master(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path / "root"))
    monkeypatch.setenv("MASTER_LITE_CHECKPOINT_STORAGE_ROOTS", f"{tmp_path}/a:{tmp_path}/b")
    app = MasterLite()
    assert app.checkpoint_storage_roots == [f"{tmp_path}/a", f"{tmp_path}/b"]
    # The master's own storage comes first and is always allowed.
    assert app.build_master()._shared.storage_roots == tuple(
        path.resolve()
        for path in (tmp_path / "root" / "checkpoints", tmp_path / "a", tmp_path / "b")
    )
    with pytest.raises(TraitError, match="'relative/dir' is not an absolute path"):
        MasterLite(checkpoint_storage_roots=["relative/dir"])


def test_run_trials_as_settings_reach_the_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """run_trials_as / fallback_unix_user / trial_python: env defaults, checks naming the fix."""
    for name in list(os.environ):
        if name.startswith("MASTER_LITE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path / "root"))
    app = MasterLite()
    assert (app.run_trials_as, app.fallback_unix_user) == ("master", "")
    assert app.build_master().runs.accounts.run_trials_as == "master"
    monkeypatch.setenv("MASTER_LITE_RUN_TRIALS_AS", "owner")
    monkeypatch.setenv("MASTER_LITE_FALLBACK_UNIX_USER", "no-such-unix-user-x")
    monkeypatch.setenv("MASTER_LITE_TRIAL_PYTHON", "/opt/py/bin/python")
    app = MasterLite()
    assert (app.run_trials_as, app.fallback_unix_user, app.trial_python) == (
        "owner",
        "no-such-unix-user-x",
        "/opt/py/bin/python",
    )
    expected = (
        "fallback_unix_user: no Unix user 'no-such-unix-user-x'"
        if os.geteuid() == 0
        else "run_trials_as='owner' needs a master that runs as root"
    )
    with pytest.raises(ValueError, match=expected):
        app.build_master()
    monkeypatch.setenv("MASTER_LITE_RUN_TRIALS_AS", "everyone")
    with pytest.raises(TraitError, match="MASTER_LITE_RUN_TRIALS_AS='everyone'"):
        _ = MasterLite().run_trials_as


def test_read_access_and_session_settings_reach_the_master(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """read_access: 'all' by default, from MASTER_LITE_READ_ACCESS, --read-access, checked."""
    for name in list(os.environ):
        if name.startswith("MASTER_LITE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path / "root"))
    assert MasterLite().build_master().users.read_access == "all"
    monkeypatch.setenv("MASTER_LITE_READ_ACCESS", "own")
    assert MasterLite().build_master().users.read_access == "own"
    monkeypatch.setenv("MASTER_LITE_READ_ACCESS", "mine")
    with pytest.raises(TraitError, match="MASTER_LITE_READ_ACCESS='mine': expected 'all' or 'own'"):
        _ = MasterLite().read_access
    monkeypatch.delenv("MASTER_LITE_READ_ACCESS")
    assert MasterLite().build_master().users.session_lifetime_hours == 168
    monkeypatch.setenv("MASTER_LITE_SESSION_LIFETIME_HOURS", "2")
    assert MasterLite().build_master().users.session_lifetime_hours == 2
    monkeypatch.setenv("MASTER_LITE_SESSION_LIFETIME_HOURS", "0")
    with pytest.raises(
        TraitError, match="SESSION_LIFETIME_HOURS=0.0: session_lifetime_hours must be > 0"
    ):
        _ = MasterLite().session_lifetime_hours
    monkeypatch.delenv("MASTER_LITE_SESSION_LIFETIME_HOURS")
    assert (
        MasterLite(
            config=_cli._config(_cli._parser().parse_args(["--read-access", "own"]))
        ).read_access
        == "own"
    )


def test_bad_settings_name_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_LITE_PORT", "eighty")
    with pytest.raises(TraitError, match="MASTER_LITE_PORT='eighty'"):
        _ = MasterLite().port
    with pytest.raises(TraitError, match="port must be 0..65535"):
        MasterLite(port=70000)
    with pytest.raises(TraitError, match="tensorboard_refresh_seconds must be > 0, got 0"):
        MasterLite(tensorboard_refresh_seconds=0)


# --- in-process lifecycle with a fake facade ------------------------------------------------


def test_start_writes_private_master_json_and_stop_removes_it(tmp_path: Path) -> None:
    fake = LifecycleFakeMaster(tmp_path)
    app = MasterLite(root_dir=str(tmp_path), port=0, master=fake)

    async def scenario() -> None:
        url = await app.start()
        assert fake.started_with == url
        path = tmp_path / "master.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        token_file = tmp_path / "private" / "user_token"
        assert json.loads(path.read_text()) == {  # no secret in master.json (issue 26 row 6)
            "url": url,
            "pid": os.getpid(),
            "token_file": str(token_file),
        }
        assert token_file.read_text() == "app-test-token\n"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        answer = await asyncio.to_thread(
            requests.get,
            url + "/api/v1/master",
            headers={"Authorization": "Bearer app-test-token"},
            timeout=10,
        )
        assert answer.json()["cluster_id"] == "fake-cluster"
        await app.stop()
        assert fake.stopped_with == {"pause_running": True}
        assert not path.exists()

    asyncio.run(scenario())


def test_port_in_use_is_a_start_error_naming_the_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        app = MasterLite(root_dir=str(tmp_path), port=port, master=LifecycleFakeMaster(tmp_path))
        with pytest.raises(MasterLiteStartError, match=f"port {port} .*already in use.*--port"):
            asyncio.run(app.start())
    assert not (tmp_path / "master.json").exists()


# --- the command ----------------------------------------------------------------------------


def test_help_lists_the_options() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "master_lite", "--help"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    for option in ("--root-dir", "--host", "--port", "--cpu-slots"):
        assert option in result.stdout


@pytest.mark.slow
def test_port_in_use_exits_1_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "master_lite", "--port", str(port), "--root-dir", str(tmp_path)],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        f"master-lite: error: port {port} on 127.0.0.1 is already in use; choose "
        "another with --port N (or --port 0 for any free port)"
    )


def _tiny_context() -> bytes:
    script = (
        b"import json, os, urllib.request\n"
        b"print('hello from trial', os.environ['DET_TRIAL_ID'], flush=True)\n"
        b"body = {'reports': [{'group': 'training', 'steps_completed': 1,"
        b" 'metrics': {'loss': 0.5}}]}\n"
        b"request = urllib.request.Request(os.environ['DET_MASTER'] + '/api/v1/trials/' +"
        b" os.environ['DET_TRIAL_ID'] + '/metrics', data=json.dumps(body).encode(),"
        b" method='POST', headers={'Authorization': 'Bearer ' +"
        b" os.environ['DET_SESSION_TOKEN'], 'Content-Type': 'application/json'})\n"
        b"urllib.request.urlopen(request).read()\n"
    )
    return tar_gz({"train.py": script})


@pytest.mark.slow
def test_master_lite_process_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "root"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "master_lite",
            "--port",
            "0",
            "--root-dir",
            str(root),
            "--cpu-slots",
            "1",
        ],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("master-lite listening on http://127.0.0.1:"), (
            line + process.stderr.read() if not line else line
        )
        master_json = root / "master.json"
        token_file = root / "private" / "user_token"
        assert f"token in {token_file}" in line
        assert stat.S_IMODE(master_json.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        info = json.loads(master_json.read_text())
        assert info["pid"] == process.pid and line.split()[3] == info["url"]
        assert "token" not in info and info["token_file"] == str(token_file)
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {token_file.read_text().strip()}"
        url = info["url"] + "/api/v1"

        # A second master on the same root dir would share the store: refused.
        second = subprocess.run(
            [sys.executable, "-m", "master_lite", "--port", "0", "--root-dir", str(root)],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert f"in use by another master-lite (pid {process.pid}" in second.stderr

        events = api.get(url + "/events?types=trial", stream=True, timeout=30)
        assert events.headers["Content-Type"] == "text/event-stream"
        config = (
            "name: round-trip\nentrypoint: python3 train.py\n"
            "searcher: {name: single, metric: loss, max_length: 1}\n"
        )
        created = api.post(
            url + "/experiments",
            json={"config": config, "context": base64.b64encode(_tiny_context()).decode()},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        exp_id = created.json()["experiment"]["id"]

        def finished_trial() -> dict | None:
            trials = api.get(f"{url}/experiments/{exp_id}/trials", timeout=10).json()["trials"]
            return trials[0] if trials and trials[0]["state"] == "COMPLETED" else None

        trial = wait_until(finished_trial, 60, "the trial to complete")
        logs = api.get(f"{url}/trials/{trial['id']}/logs", timeout=10).json()["logs"]
        assert f"hello from trial {trial['id']}" in [log["line"] for log in logs]
        metrics = api.get(f"{url}/trials/{trial['id']}/metrics", timeout=10).json()["metrics"]
        assert [m["metrics"] for m in metrics] == [{"loss": 0.5}]
        assert requests.get(url + "/experiments", timeout=10).status_code == 401
        # The stream saw the trial's updates while it ran (already buffered on our side).
        seen_states = []
        lines = events.iter_lines(decode_unicode=True)
        for text in lines:
            if text.startswith("data: "):
                seen_states.append(json.loads(text[len("data: ") :])["state"])
                if seen_states[-1] == "COMPLETED":
                    break
        events.close()
        assert seen_states[0] == "ACTIVE" and seen_states[-1] == "COMPLETED"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, process.stderr.read()
    assert not (root / "master.json").exists()


def test_a_stale_master_json_is_replaced(tmp_path: Path) -> None:
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    (tmp_path / "master.json").write_text(
        json.dumps({"url": "http://127.0.0.1:1", "token": "old", "pid": exited.pid})
    )
    fake = LifecycleFakeMaster(tmp_path)
    app = MasterLite(root_dir=str(tmp_path), port=0, master=fake)

    async def scenario() -> None:
        url = await app.start()
        assert json.loads((tmp_path / "master.json").read_text())["url"] == url
        await app.stop()

    asyncio.run(scenario())
