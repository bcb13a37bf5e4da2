"""A real Jupyter server process (JupyterLab, or jupyter_server) with the extension enabled."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def repo_environment(**extra: str) -> dict[str, str]:
    """The test environment for child processes: this venv first, the repo importable."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("DET_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "harness"), str(REPO)])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra)
    return env


@dataclasses.dataclass
class ServerProcess:
    process: subprocess.Popen
    base: str  # http://127.0.0.1:PORT/base/
    token: str
    root_dir: Path  # MasterLite.root_dir
    notebook_dir: Path
    log_path: Path
    argv: list[str]
    env: dict[str, str]

    @property
    def det_master(self) -> str:
        return self.base + "determined"

    def api(self, method: str, path: str, **kwargs) -> dict:
        response = requests.request(method, f"{self.det_master}/api/v1/{path.lstrip('/')}",
                                    headers={"Authorization": f"token {self.token}"},
                                    timeout=30, **kwargs)
        response.raise_for_status()
        return response.json()

    def kernel_environment(self) -> dict[str, str]:
        """What a kernel started by this server sees (the extension exported these)."""
        return repo_environment(DET_MASTER=self.det_master, DET_MASTER_TOKEN=self.token)

    def wait_experiment(self, experiment_id: int, timeout: float = 240) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            answer = self.api("GET", f"experiments/{experiment_id}")
            if answer["experiment"]["state"] in TERMINAL:
                return answer
            if time.monotonic() > deadline:
                trials = "\n".join(f"trial {t['id']} {t['state']} steps={t['steps_completed']}:\n"
                                   f"{self.trial_logs(t['id'])[-1500:]}" for t in answer["trials"])
                raise AssertionError(f"experiment {experiment_id} still "
                                     f"{answer['experiment']['state']} after {timeout} s\n"
                                     f"{trials}\nserver log:\n{self.log()[-2000:]}")
            time.sleep(0.5)

    def trial_logs(self, trial_id: int) -> str:
        return "\n".join(entry["line"].rstrip("\n") for entry in
                         self.api("GET", f"trials/{trial_id}/logs")["logs"])

    def stop(self, timeout: float = 90) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_server(tmp: Path, *, app: str = "jupyterlab", root_dir: Path | None = None,
                 cpu_slots: int = 2, timeout: float = 90) -> ServerProcess:
    """Start `python -m jupyterlab` (or jupyter_server) with jupyter_determined enabled."""
    config_dir = tmp / "jupyter-config"
    config_dir.mkdir(parents=True, exist_ok=True)
    root_dir = root_dir or tmp / "det-root"
    # The project is not installed in the venv: enable the extension the way the wheel's
    # jupyter_server_config.d entry does, through a config file.
    (config_dir / "jupyter_server_config.json").write_text(json.dumps({
        "ServerApp": {"jpserver_extensions": {"jupyter_determined": True}},
        "MasterLite": {"root_dir": str(root_dir), "cpu_slots": cpu_slots,
                       "preemption_grace_seconds": 30},
    }))
    notebook_dir = tmp / "notebooks"
    notebook_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    token = "test-token-" + os.urandom(6).hex()
    env = repo_environment(JUPYTER_CONFIG_DIR=str(config_dir),
                           JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
                           JUPYTER_PLATFORM_DIRS="1")
    argv = [sys.executable, "-m", app, "--no-browser", f"--port={port}", "--ip=127.0.0.1",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={notebook_dir}",
            "--ServerApp.base_url=/jl/", "--ServerApp.port_retries=0"]
    if os.geteuid() == 0:  # containers run tests as root
        argv.append("--allow-root")
    log_path = tmp / f"{app}-{port}.log"
    process = subprocess.Popen(argv, env=env, stdout=open(log_path, "ab"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    server = ServerProcess(process, f"http://127.0.0.1:{port}/jl/", token, root_dir,
                           notebook_dir, log_path, argv, env)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{app} exited with {process.returncode}:\n{server.log()[-4000:]}")
        try:
            server.api("GET", "master")
            return server
        except (requests.RequestException, ValueError):
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"{app} did not serve the API within {timeout} s:\n"
                                   f"{server.log()[-4000:]}")
            time.sleep(0.3)


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory) -> Iterator[ServerProcess]:
    server = start_server(tmp_path_factory.mktemp("lab"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def start_jupyter(tmp_path_factory):
    """A factory: `start_jupyter(app="jupyter_server", root_dir=None)` -> ServerProcess;
    every server it started is stopped at the end of the module."""
    started: list[ServerProcess] = []

    def start(app: str = "jupyterlab", root_dir: Path | None = None) -> ServerProcess:
        server = start_server(tmp_path_factory.mktemp(app), app=app, root_dir=root_dir)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def shell(monkeypatch):
    """A fresh in-process IPython shell with no notebook behind it (memory-only history, no
    frontend snapshot): what the export sees from a plain kernel. Files needing more override it."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from jupyter_determined._export import frontend_notebook

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(frontend_notebook, "snapshot", None)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    instance = InteractiveShell.instance(config=config)
    yield instance
    InteractiveShell.clear_instance()
