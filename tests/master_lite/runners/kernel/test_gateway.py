"""Kernel trials on a real Jupyter Kernel Gateway (`jupyter-kernel-gateway`, test extras) on
loopback: a search with metrics, checkpoints and logs, the trial's environment through the
gateway's whitelist and in the kernel, and the submit-time errors (gateway down, unknown
kernelspec on the gateway)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from determined.common.api import errors as api_errors
from tests._support import MasterProcess, child_env, submit, wait_for_experiment, wait_until
from tests._support.process import free_port
from tests.master_lite.runners.kernel.test_kernels import FILES, SINGLE, assert_clean_series, config

TOKEN = "gateway-test-token"
ENV_SCRIPT = """
import os
print("ENV", os.environ.get("DET_TRIAL_ID"), os.environ.get("MY_SETTING"), os.environ["DET_MASTER"])
print("CWD", os.getcwd())
"""


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    """A Kernel Gateway on loopback (token auth; DET_TRIAL_ID whitelisted); its URL."""
    with running_gateway(tmp_path) as url:
        yield url


@contextlib.contextmanager
def running_gateway(tmp_path: Path, *options: str) -> Iterator[str]:
    """A Kernel Gateway on loopback with `options` (KernelGatewayApp flags); its URL."""
    spec = importlib.util.find_spec("kernel_gateway")
    assert spec is not None and spec.origin, "jupyter-kernel-gateway is in the test extras"
    site = str(Path(spec.origin).parent.parent)
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], site])
    env["KG_ENV_WHITELIST"] = "DET_TRIAL_ID"
    env["KG_ENV_PROCESS_WHITELIST"] = "PYTHONPATH,HOME"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "gateway.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernel_gateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}",
            f"--KernelGatewayApp.auth_token={TOKEN}",
            "--JupyterWebsocketPersonality.list_kernels=True",
            *options,
        ],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def answers() -> bool:
        try:
            headers = {"Authorization": f"token {TOKEN}"}
            return requests.get(f"{url}/api/kernelspecs", headers=headers, timeout=2).ok
        except requests.RequestException:
            return False

    try:
        # A Jupyter server's first start imports much: past a minute on a loaded 2-core CI
        # machine (the whole suite runs beside it). A gateway that died fails at once.
        wait_until(
            lambda: answers() or process.poll() is not None, 180, "the kernel gateway to answer"
        )
        assert process.poll() is None, f"the kernel gateway exited {process.returncode}"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def gateway_kernels(url: str) -> list[dict]:
    headers = {"Authorization": f"token {TOKEN}"}
    return list(requests.get(f"{url}/api/kernels", headers=headers, timeout=5).json())


def test_a_search_runs_in_kernels_on_a_kernel_gateway(
    start_master: Callable[..., MasterProcess], gateway: str
) -> None:
    master = start_master(env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN})
    cfg = config(
        searcher={"name": "random", "max_trials": 2}, step_sleep=0.01, kernel={"gateway": gateway}
    )
    exp_id = submit(master, cfg, FILES)
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    trials = master.trials(exp_id)
    assert len(trials) == 2
    for trial in trials:
        assert_clean_series(master, trial)
        logs = master.logs(trial["id"])
        assert any(
            line.startswith(f"kernel 'python3' started on the Jupyter Gateway {gateway} (id ")
            for line in logs
        ), logs
        steps = [
            c["steps_completed"]
            for c in master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
            if c["trial_id"] == trial["id"]
        ]
        assert sorted(steps) == [30, 60, 90, 100]
    wait_until(lambda: gateway_kernels(gateway) == [], 30, "the gateway's kernels to end")


def test_the_trials_environment_reaches_a_gateway_kernel(
    start_master: Callable[..., MasterProcess], gateway: str
) -> None:
    # The master URL the gateway's machine reaches, not the master's loopback one.
    master = start_master(
        env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN},
        extra_args=["--kernel-gateway-master-url", "http://master.example:8080"],
    )
    cfg = config(searcher=SINGLE, step_sleep=0, kernel={"gateway": gateway})
    cfg["entrypoint"] = "python3 env.py"
    cfg["environment"]["environment_variables"] = ["MY_SETTING=from-config"]
    exp_id = submit(master, cfg, {"env.py": ENV_SCRIPT})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    logs = master.logs(trial["id"])
    assert f"ENV {trial['id']} from-config http://master.example:8080" in logs
    # It ran in its own copy of the files, not in the master's work dir.
    (cwd,) = [line.split(" ", 1)[1] for line in logs if line.startswith("CWD ")]
    assert os.path.basename(cwd).startswith(f"determined-trial-{trial['id']}-")


def test_gateway_problems_are_refused_at_submit(
    start_master: Callable[..., MasterProcess], gateway: str
) -> None:
    master = start_master(env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN})
    down = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(api_errors.APIError) as info:
        submit(master, config(searcher=SINGLE, step_sleep=0, kernel={"gateway": down}), FILES)
    assert f"environment.kernel.gateway: the Jupyter Gateway at {down} is unreachable" in str(
        info.value
    )
    cfg = config(searcher=SINGLE, step_sleep=0, kernel={"gateway": gateway, "spec": "julia"})
    with pytest.raises(api_errors.APIError) as info:
        submit(master, cfg, FILES)
    assert (
        f"environment.kernel.spec: the Jupyter Gateway at {gateway} has no kernelspec named "
        "'julia' (it has: python3)"
    ) in str(info.value)
    cfg = config(searcher=SINGLE, step_sleep=0, kernel={"gateway": "gateway.example:8888"})
    with pytest.raises(api_errors.APIError) as info:
        submit(master, cfg, FILES)
    assert "environment.kernel.gateway: 'gateway.example:8888' is not a gateway URL" in str(
        info.value
    )
    bad_token = start_master()
    with pytest.raises(api_errors.APIError) as info:
        submit(bad_token, config(searcher=SINGLE, step_sleep=0, kernel={"gateway": gateway}), FILES)
    assert f"the Jupyter Gateway at {gateway} refused GET /api/kernelspecs: HTTP 401" in str(
        info.value
    ) or "HTTP 403" in str(info.value)


def test_a_kernel_start_the_gateway_refuses_ends_the_trial_with_its_answer(
    start_master: Callable[..., MasterProcess], tmp_path: Path
) -> None:
    master = start_master(env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN})
    with running_gateway(tmp_path, "--KernelGatewayApp.max_kernels=0") as full:
        exp_id = submit(
            master, config(searcher=SINGLE, step_sleep=0, kernel={"gateway": full}), FILES
        )
        wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    assert trial["state"] == "ERROR"
    logs = "\n".join(master.logs(trial["id"]))
    assert (
        f"could not run the trial in kernel 'python3': the Jupyter Gateway at {full} refused "
        "POST /api/kernels: HTTP 403"
    ) in logs, logs


@pytest.mark.slow
def test_a_dropped_websocket_is_reconnected_while_the_kernel_lives(gateway: str) -> None:
    """The gateway kernel handle itself (what the runner drives): its websocket is cut under it,
    and it goes on executing in the same kernel."""
    import socket

    from master_lite.runners.kernel._handles import GatewayKernel

    kernel = GatewayKernel({"url": gateway, "token": TOKEN}, "python3", {})
    try:

        def run(code: str) -> str:
            msg_id = kernel.execute(code, silent=False, user_expressions={})
            out: list[str] = []
            while True:
                message = kernel.iopub(0.2)
                if message is None or message["parent_header"].get("msg_id") != msg_id:
                    continue
                if message["msg_type"] == "stream":
                    out.append(message["content"]["text"])
                if (
                    message["msg_type"] == "status"
                    and message["content"]["execution_state"] == "idle"
                ):
                    return "".join(out)

        assert run("x = 41\nprint(x)") == "41\n"
        dropped = kernel._socket
        dropped.sock.shutdown(socket.SHUT_RDWR)  # the connection drops under it
        assert run("print(x + 1)") == "42\n"  # the same kernel: its state is there
        assert kernel._socket is not dropped and kernel.alive()
    finally:
        kernel.shutdown(now=True)
    wait_until(lambda: gateway_kernels(gateway) == [], 30, "the kernel to end")
