"""Kernel trials of a master hosted in a Jupyter server: their kernels are the server's (listed
in its running kernels, with a session named after the trial), attachable, and gone when the
trial ends."""

from __future__ import annotations

import json
from collections.abc import Callable

import requests

from determined.cli import TrialKernel
from tests._support import context_tarball, wait_until
from tests._support.jupyter import JupyterServer
from tests.master_lite.runners.kernel.test_attach import BOOM, LOOP
from tests.master_lite.runners.kernel.test_kernels import SINGLE, config


def jupyter_api(server: JupyterServer, path: str) -> list[dict]:
    response = requests.get(
        f"{server.base}api/{path}", headers={"Authorization": f"token {server.token}"}, timeout=30
    )
    response.raise_for_status()
    return list(response.json())


def test_a_kernel_trial_runs_in_the_servers_kernel_manager(
    start_jupyter: Callable[..., JupyterServer],
) -> None:
    server = start_jupyter(app="jupyter_server")
    cfg = {**config(searcher=SINGLE, step_sleep=0), "entrypoint": "python3 s.py"}
    body = {"config": json.dumps(cfg), "context": context_tarball({"s.py": LOOP})}
    exp_id = server.api("POST", "experiments", json=body)["experiment"]["id"]
    trial_id = wait_until(
        lambda: [t["id"] for t in server.api("GET", f"experiments/{exp_id}/trials")["trials"]],
        30,
        "the trial",
    )[0]
    wait_until(lambda: "looping" in server.trial_logs(trial_id), 60, "the loop to start")
    info = server.api("GET", f"trials/{trial_id}/kernel")
    sessions = jupyter_api(server, "sessions")
    (session,) = [s for s in sessions if s["name"] == f"trial-{trial_id}"]
    assert session["kernel"]["id"] == info["jupyter_kernel_id"]
    assert info["jupyter_kernel_id"] in [k["id"] for k in jupyter_api(server, "kernels")]

    kernel = TrialKernel(info)
    try:
        out: list[str] = []
        assert kernel.run("print(step > 0); stop = True", write=out.append)
        assert "".join(out) == "True\n"
    finally:
        kernel.close()
    assert server.wait_experiment(exp_id)["experiment"]["state"] == "COMPLETED"
    wait_until(
        lambda: info["jupyter_kernel_id"] not in [k["id"] for k in jupyter_api(server, "kernels")],
        30,
        "the server's kernel to end",
    )
    assert not [s for s in jupyter_api(server, "sessions") if s["name"] == f"trial-{trial_id}"]


def test_kept_kernels_end_with_their_experiment_and_never_hold_up_the_servers_stop(
    start_jupyter: Callable[..., JupyterServer],
) -> None:
    # The kept kernel is shut down from the server's own event loop (the experiment's delete,
    # the extension's stop): that must neither hang the loop nor the server's exit.
    server = start_jupyter(app="jupyter_server")

    def failed_trial_kernel() -> tuple[int, str]:
        cfg = {
            **config(searcher=SINGLE, step_sleep=0, kernel={"keep_alive": 300}),
            "entrypoint": "python3 s.py",
        }
        body = {"config": json.dumps(cfg), "context": context_tarball({"s.py": BOOM})}
        exp_id = server.api("POST", "experiments", json=body)["experiment"]["id"]
        assert server.wait_experiment(exp_id)["experiment"]["state"] == "ERROR"
        (trial,) = server.api("GET", f"experiments/{exp_id}/trials")["trials"]
        info = server.api("GET", f"trials/{trial['id']}/kernel")
        assert info["post_mortem"] is True
        return exp_id, info["jupyter_kernel_id"]

    def kernel_ids() -> list[str]:
        return [k["id"] for k in jupyter_api(server, "kernels")]

    exp_id, kernel_id = failed_trial_kernel()
    assert kernel_id in kernel_ids()
    server.api("DELETE", f"experiments/{exp_id}")
    wait_until(lambda: kernel_id not in kernel_ids(), 30, "the deleted experiment's kernel to end")
    assert server.api("GET", "experiments")["experiments"] == []  # the loop still answers

    failed_trial_kernel()  # one more kept kernel, there when the server stops
    assert server.stop() == 0  # a clean stop (SIGTERM), not killed after stop's timeout
