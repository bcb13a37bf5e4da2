"""The master's default Jupyter Gateway (`--kernel-gateway-url`, MasterLite.kernel_gateway_*)
and the `environment.jupyter_gateway` spelling, against a real Kernel Gateway on loopback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from determined.common.api import errors as api_errors
from tests._support import MasterProcess, child_env, submit, wait_for_experiment
from tests._support.process import free_port
from tests.master_lite.runners.kernel.test_gateway import TOKEN, gateway  # noqa: F401 (a fixture)
from tests.master_lite.runners.kernel.test_kernels import SINGLE, config

SCRIPT = 'print("ran here")\n'


def one_trial(kernel: dict | None = None, environment: dict | None = None) -> dict:
    cfg = config(searcher=SINGLE, step_sleep=0, kernel=kernel)
    cfg["entrypoint"] = "python3 s.py"
    if environment is not None:
        cfg["environment"] = {**cfg["environment"], **environment}
        if kernel is None:
            cfg["environment"].pop("kernel")
    return cfg


def run_logs(master: MasterProcess, cfg: dict) -> list[str]:
    exp_id = submit(master, cfg, {"s.py": SCRIPT})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    logs = master.logs(trial["id"])
    assert "ran here" in logs
    return logs


def on_gateway(logs: list[str], url: str) -> bool:
    return any(
        line.startswith(f"kernel 'python3' started on the Jupyter Gateway {url} (id ")
        for line in logs
    )


def test_the_masters_default_gateway_runs_kernels_that_name_none(
    start_master: Callable[..., MasterProcess],
    gateway: str,  # noqa: F811
) -> None:
    # The token comes from the master's own setting, not from the config.
    master = start_master(
        extra_args=["--kernel-gateway-url", gateway],
        env={"MASTER_LITE_KERNEL_GATEWAY_TOKEN": TOKEN},
    )
    assert on_gateway(run_logs(master, one_trial()), gateway)
    # `gateway: local` opts back into a local kernel.
    logs = run_logs(master, one_trial(kernel={"gateway": "local"}))
    assert not on_gateway(logs, gateway)
    assert any(line.startswith("kernel 'python3' started (pid ") for line in logs), logs


def test_environment_jupyter_gateway_is_an_alias_of_kernel_gateway(
    start_master: Callable[..., MasterProcess],
    gateway: str,  # noqa: F811
) -> None:
    master = start_master(env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN})
    # It implies a kernel: the config has no environment.kernel.
    cfg = one_trial(environment={"jupyter_gateway": gateway})
    exp_id = submit(master, cfg, {"s.py": SCRIPT})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    assert on_gateway(master.logs(trial["id"]), gateway)
    stored = master.session.get(f"/experiments/{exp_id}")["experiment"]["config"]["environment"]
    assert stored["kernel"]["gateway"] == gateway and "jupyter_gateway" not in stored
    # The same gateway both ways is fine; two different ones are refused.
    same = one_trial(kernel={"gateway": gateway}, environment={"jupyter_gateway": gateway})
    submit(master, same, {"s.py": SCRIPT})
    other = f"http://127.0.0.1:{free_port()}"
    both = one_trial(kernel={"gateway": other}, environment={"jupyter_gateway": gateway})
    with pytest.raises(api_errors.APIError) as info:
        submit(master, both, {"s.py": SCRIPT})
    assert (
        f"environment.jupyter_gateway: '{gateway}' differs from environment.kernel.gateway "
        f"'{other}' (they are two spellings of one setting: give one of them)"
    ) in str(info.value)


def test_submit_checks_the_default_gateway(
    start_master: Callable[..., MasterProcess],
    gateway: str,  # noqa: F811
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    master = start_master(extra_args=["--kernel-gateway-url", down])
    with pytest.raises(api_errors.APIError) as info:
        submit(master, one_trial(), {"s.py": SCRIPT})
    message = str(info.value)
    assert "MasterLite.kernel_gateway_url (the master's default gateway; `gateway: local`" in (
        message
    )
    assert f"the Jupyter Gateway at {down} is unreachable" in message
    # A kernelspec the default gateway lacks is named with the gateway.
    with_gateway = start_master(
        extra_args=["--kernel-gateway-url", gateway], env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN}
    )
    with pytest.raises(api_errors.APIError) as info:
        submit(with_gateway, one_trial(kernel={"spec": "julia"}), {"s.py": SCRIPT})
    assert (
        f"environment.kernel.spec: the Jupyter Gateway at {gateway} has no kernelspec named "
        "'julia' (it has: python3)"
    ) in str(info.value)
    # An experiment that opts out is not checked against the (down) default gateway.
    exp_id = submit(master, one_trial(kernel={"gateway": "local"}), {"s.py": SCRIPT})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"


@pytest.mark.slow
def test_a_bad_default_gateway_url_stops_the_master_at_start() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "master_lite", "--kernel-gateway-url", "gpu-box:8888"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        "master-lite: error: kernel_gateway_url must be an http(s)://host:port URL, got "
        "'gpu-box:8888'"
    ) in result.stderr
    help_text = subprocess.run(
        [sys.executable, "-m", "master_lite", "--help"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "--kernel-gateway-url URL" in help_text
    assert "--kernel-gateway-master-url URL" in help_text
