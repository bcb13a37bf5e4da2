"""Issue 26, row 5: `jupyter server --port 0` hosts a master that trials can reach.

The OS picks the port once the server binds: the master's URL in DET_MASTER and master.json
must name that port (not `:0`), trials must complete against it, and a second master on the
same root dir must see the first one.
"""

from __future__ import annotations

import json
import pathlib
import urllib.parse

import pytest

from tests._support import context_tarball
from tests._support.jupyter import JupyterServer

pytestmark = pytest.mark.slow

TRIAL = """\
import determined as det

with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        core_context.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        op.report_completed(0.5)
"""


class PortZeroJupyter(JupyterServer):
    """A JupyterServer started with `--port=0`: its port is learnt from master.json."""

    def command(self) -> list[str]:
        return ["--port=0" if arg.startswith("--port=") else arg for arg in super().command()]

    def ready(self) -> bool:
        try:
            info = json.loads((self.root_dir / "master.json").read_text())
        except (OSError, ValueError):
            return False
        # The URL the master publishes is the only way to learn the port: follow it.
        address = urllib.parse.urlsplit(str(info.get("url", "")))
        if not address.port:
            raise AssertionError(f"master.json names no port: {info}")
        self.port = address.port
        self.base = f"http://127.0.0.1:{self.port}/jl/"
        return super().ready()


def test_port_zero_gives_trials_the_real_url_and_they_complete(tmp_path: pathlib.Path) -> None:
    server = PortZeroJupyter(tmp_path / "jupyter", app="jupyter_server")
    server.launch(120, interval=0.3)
    try:
        info = json.loads((server.root_dir / "master.json").read_text())
        assert info["url"] == server.det_master  # the bound port, under the base URL
        assert server.port != 0
        config = {
            "name": "port-zero",
            "entrypoint": "python3 train.py",
            "max_restarts": 0,
            "searcher": {"name": "single", "metric": "loss", "max_length": 2},
        }
        experiment = server.api(
            "POST",
            "experiments",
            json={"config": config, "context": context_tarball({"train.py": TRIAL})},
        )["experiment"]
        answer = server.wait_experiment(experiment["id"], timeout=120)
        trial = answer["trials"][0]
        assert answer["experiment"]["state"] == "COMPLETED", server.trial_logs(trial["id"])
        assert trial["steps_completed"] == 2

        # The same-root-dir check sees this master through the URL it published.
        from master_lite import MasterLite
        from master_lite._app import MasterLiteStartError

        other = MasterLite(root_dir=str(server.root_dir))
        with pytest.raises(MasterLiteStartError, match="in use by another master-lite"):
            other.check_not_running()
    finally:
        server.stop(90)
