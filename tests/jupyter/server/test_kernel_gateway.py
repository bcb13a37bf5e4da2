"""A master hosted in a Jupyter server takes its default Jupyter Gateway from the server's
configuration (`--MasterLite.kernel_gateway_url`): a kernel trial runs on a real Kernel Gateway
(loopback), and attaches through the gateway kernel's websocket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from determined.cli import TrialKernel
from tests._support import context_tarball, wait_until
from tests._support.jupyter import JupyterServer
from tests.master_lite.runners.kernel.test_attach import LOOP
from tests.master_lite.runners.kernel.test_gateway import (  # noqa: F401 (a fixture)
    TOKEN,
    gateway,
    gateway_kernels,
)
from tests.master_lite.runners.kernel.test_kernels import SINGLE, config

pytestmark = pytest.mark.slow


class GatewayJupyter(JupyterServer):
    """A Jupyter server whose master has a default gateway (and its token in the environment)."""

    gateway_url = ""

    def command(self) -> list[str]:
        return [*super().command(), f"--MasterLite.kernel_gateway_url={self.gateway_url}"]

    def environment(self) -> dict[str, str]:
        return {**super().environment(), "MASTER_LITE_KERNEL_GATEWAY_TOKEN": TOKEN}


def test_a_jupyter_hosted_master_runs_kernel_trials_on_its_gateway(
    tmp_path: Path,
    gateway: str,  # noqa: F811
) -> None:
    GatewayJupyter.gateway_url = gateway
    server = GatewayJupyter(tmp_path / "jupyter", app="jupyter_server")
    server.launch(120, interval=0.3)
    try:
        cfg = {**config(searcher=SINGLE, step_sleep=0), "entrypoint": "python3 s.py"}
        body = {"config": json.dumps(cfg), "context": context_tarball({"s.py": LOOP})}
        exp_id = server.api("POST", "experiments", json=body)["experiment"]["id"]
        (trial_id,) = wait_until(
            lambda: [t["id"] for t in server.api("GET", f"experiments/{exp_id}/trials")["trials"]],
            30,
            "the trial",
        )
        wait_until(lambda: "looping" in server.trial_logs(trial_id), 60, "the loop to start")
        assert f"started on the Jupyter Gateway {gateway} (id " in server.trial_logs(trial_id)
        info = server.api("GET", f"trials/{trial_id}/kernel")
        assert [k["id"] for k in gateway_kernels(gateway)] == [info["kernel_id"]]
        kernel = TrialKernel(info)
        try:
            out: list[str] = []
            assert kernel.run("print(step > 0); stop = True", write=out.append)
            assert "".join(out) == "True\n"
        finally:
            kernel.close()
        assert server.wait_experiment(exp_id)["experiment"]["state"] == "COMPLETED"
        wait_until(lambda: gateway_kernels(gateway) == [], 30, "the gateway's kernel to end")
    finally:
        server.stop(90)
