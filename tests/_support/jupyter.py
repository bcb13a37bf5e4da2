"""A real Jupyter server (JupyterLab or jupyter_server) with jupyter_determined enabled.

The project is not installed in the venv: the server extension is enabled through a config file,
as the wheel's jupyter_server_config.d entry would, and (with `labextension=True`, for the browser
tests) the built labextension is found through JUPYTER_PATH, where `pip install` would place it.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from typing import Any

import requests

from tests._support.process import REPO, ServerProcess, child_env, free_port
from tests._support.states import TERMINAL_EXPERIMENT_STATES
from tests._support.waiting import wait_until

BUILT_EXTENSION = REPO / "jupyter_determined" / "labextension"


class JupyterServer(ServerProcess):
    """`python -m jupyterlab` (or `jupyter_server`) on loopback under base URL /jl/.

    Construct it, then `launch()` (or use `JupyterServer.start(...)`); `restart()` starts it again
    on the same port, token and directories.

    Args:
        tmp: a private directory for its config, runtime, notebooks and log.
        app: "jupyterlab" or "jupyter_server".
        root_dir: the Determined root dir (MasterLite.root_dir); `tmp/det-root` by default.
        cpu_slots: MasterLite.cpu_slots.
        labextension: serve the built labextension and configure JupyterLab for a browser.
        port: a fixed port (a restart keeps it); a free one by default.
        token: a fixed token; a random one by default.
        log_name: the log file's name in `tmp`.
    """

    def __init__(
        self,
        tmp: pathlib.Path,
        *,
        app: str = "jupyterlab",
        root_dir: pathlib.Path | None = None,
        cpu_slots: int = 2,
        labextension: bool = False,
        port: int | None = None,
        token: str | None = None,
        log_name: str | None = None,
    ) -> None:
        self.tmp = pathlib.Path(tmp)
        self.app = app
        self.name = app
        self.root_dir = root_dir or self.tmp / "det-root"
        self.cpu_slots = cpu_slots
        self.labextension = labextension
        self.port = port or free_port()
        self.token = token or "test-token-" + os.urandom(6).hex()
        self.base = f"http://127.0.0.1:{self.port}/jl/"
        self.notebook_dir = self.tmp / "notebooks"
        self.config_dir = self.tmp / "jupyter-config"
        super().__init__(self.tmp / (log_name or f"{app}-{self.port}.log"))
        self._configure()
        self.env = self.environment()
        self.argv = self.command()

    @classmethod
    def start(cls, tmp: pathlib.Path, *, timeout: float = 120, **kwargs: Any) -> JupyterServer:
        """Construct and launch a server; see the class for the arguments."""
        server = cls(tmp, **kwargs)
        server.launch(timeout, interval=0.3)
        return server

    # -- process ------------------------------------------------------------------------------
    def _configure(self) -> None:
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.notebook_dir.mkdir(parents=True, exist_ok=True)
        (self.config_dir / "jupyter_server_config.json").write_text(
            json.dumps(
                {
                    "ServerApp": {"jpserver_extensions": {"jupyter_determined": True}},
                    "MasterLite": {
                        "root_dir": str(self.root_dir),
                        "cpu_slots": self.cpu_slots,
                        "preemption_grace_seconds": 30,
                    },
                }
            )
        )
        if self.labextension:
            link = self.tmp / "jupyter-data" / "labextensions" / "jupyter-determined"
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(BUILT_EXTENSION, target_is_directory=True)
            # No "get Jupyter news?" toast over the screenshots.
            (self.config_dir / "labconfig").mkdir(exist_ok=True)
            (self.config_dir / "labconfig" / "page_config.json").write_text(
                json.dumps(
                    {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
                )
            )

    def environment(self) -> dict[str, str]:
        extra = {
            "JUPYTER_CONFIG_DIR": str(self.config_dir),
            "JUPYTER_RUNTIME_DIR": str(self.tmp / "runtime"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }
        if self.labextension:
            extra.update(
                JUPYTER_PATH=str(self.tmp / "jupyter-data"), IPYTHONDIR=str(self.tmp / "ipython")
            )
        return child_env(extra, drop_prefixes=("DET_",))

    def command(self) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            self.app,
            "--no-browser",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.notebook_dir}",
            "--ServerApp.base_url=/jl/",
            "--ServerApp.port_retries=0",
        ]
        if self.labextension:
            argv += [
                "--LabApp.expose_app_in_browser=True",
                f"--LabApp.workspaces_dir={self.tmp / 'workspaces'}",
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ]
        if os.geteuid() == 0:  # containers run tests as root
            argv.append("--allow-root")
        return argv

    def ready(self) -> bool:
        try:
            self.api("GET", "master")
            return True
        except (requests.RequestException, ValueError):
            return False

    def restart(self, timeout: float = 120) -> JupyterServer:
        """Stop this server and start it again on the same port, token and directories."""
        self.stop()
        self.launch(timeout, interval=0.3)
        return self

    def log(self) -> str:
        """The server's log so far."""
        return self.log_text()

    # -- API ----------------------------------------------------------------------------------
    @property
    def det_master(self) -> str:
        """The DET_MASTER URL of the hosted API."""
        return self.base + "determined"

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """A request to the hosted Determined API (`/determined/api/v1/PATH`) as the owner."""
        response = requests.request(
            method,
            f"{self.det_master}/api/v1/{path.lstrip('/')}",
            headers={"Authorization": f"token {self.token}"},
            timeout=30,
            **kwargs,
        )
        response.raise_for_status()
        return response.json()

    def kernel_environment(self) -> dict[str, str]:
        """What a kernel started by this server sees (the extension exported these)."""
        return child_env(
            {"DET_MASTER": self.det_master, "DET_MASTER_TOKEN": self.token}, drop_prefixes=("DET_",)
        )

    def trial_logs(self, trial_id: int) -> str:
        """A trial's log as text."""
        return "\n".join(
            entry["line"].rstrip("\n")
            for entry in self.api("GET", f"trials/{trial_id}/logs")["logs"]
        )

    def wait_experiment(self, experiment_id: int, timeout: float = 240) -> dict:
        """Wait until an experiment is terminal; returns GET /experiments/{id} (with its trials)."""
        last: dict = {}

        def terminal() -> dict | None:
            last.update(self.api("GET", f"experiments/{experiment_id}"))
            return last if last["experiment"]["state"] in TERMINAL_EXPERIMENT_STATES else None

        def details() -> str:
            trials = "\n".join(
                f"trial {t['id']} {t['state']} steps={t['steps_completed']}:\n"
                f"{self.trial_logs(t['id'])[-1500:]}"
                for t in last["trials"]
            )
            return (
                f"experiment {experiment_id} still {last['experiment']['state']}\n"
                f"{trials}\nserver log:\n{self.log()[-2000:]}"
            )

        return wait_until(
            terminal, timeout, f"experiment {experiment_id} to end", 0.5, details=details
        )
