"""`det trial attach` on kernels that run on a real Jupyter Kernel Gateway (loopback), through
the kernel's websocket: a running trial's live globals from a subshell, and a failed trial's
kernel kept for post-mortem (its globals, `%debug` on the failing frame). The `det` process has
no gateway token of its own: the master's answer carries it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from tests._support import MasterProcess, child_env, submit, wait_for_experiment, wait_until
from tests.master_lite.runners.kernel.test_attach import BOOM, LOOP, det
from tests.master_lite.runners.kernel.test_gateway import (  # noqa: F401 (a fixture)
    TOKEN,
    gateway,
    gateway_kernels,
)
from tests.master_lite.runners.kernel.test_kernels import SINGLE, config


def gateway_experiment(
    master: MasterProcess, gateway_url: str, script: str, **kernel: float
) -> int:
    cfg = {
        **config(searcher=SINGLE, step_sleep=0, kernel={"gateway": gateway_url, **kernel}),
        "entrypoint": "python3 s.py",
    }
    return submit(master, cfg, {"s.py": script})


def test_attach_during_a_gateway_run_reads_and_sets_live_globals(
    start_master: Callable[..., MasterProcess],
    gateway: str,  # noqa: F811
) -> None:
    master = start_master(env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN})
    exp_id = gateway_experiment(master, gateway, LOOP)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: "looping" in master.logs(trial["id"]), 60, "the loop to start")
    info = master.session.get(f"/trials/{trial['id']}/kernel")
    (kernel,) = gateway_kernels(gateway)
    assert info["gateway"] == gateway and info["kernel_id"] == kernel["id"]
    assert info["gateway_token"] == TOKEN and info["post_mortem"] is False
    # The main shell is busy with the loop: only a subshell can answer.
    result = det(master, "t", "attach", str(trial["id"]), "-c", "print('STEP', step > 0, stop)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "STEP True False"
    result = det(master, "t", "attach", str(trial["id"]), "-c", "stop = True")
    assert result.returncode == 0, result.stderr
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    assert any(line.startswith("stopped at ") for line in master.logs(trial["id"]))
    wait_until(lambda: gateway_kernels(gateway) == [], 30, "the gateway's kernel to end")
    result = det(master, "t", "attach", str(trial["id"]))
    assert result.returncode != 0
    assert "it is COMPLETED and its kernel has been shut down" in result.stderr


def test_a_failed_gateway_trials_kernel_answers_best_and_debug(
    start_master: Callable[..., MasterProcess],
    gateway: str,  # noqa: F811
) -> None:
    master = start_master(env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN})
    exp_id = gateway_experiment(master, gateway, BOOM, keep_alive=300)
    wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    assert trial["state"] == "ERROR" and trial["exit_code"] == 1
    info = master.session.get(f"/trials/{trial['id']}/kernel")
    assert info["post_mortem"] is True and info["gateway"] == gateway
    result = det(master, "trial", "attach", str(trial["id"]), "-c", "best")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "41"
    # The same from a notebook's kernel (here IPython): `%det attach TRIAL_ID CODE`.
    magic = subprocess.run(
        [
            sys.executable,
            "-m",
            "IPython",
            "--no-banner",
            "--colors=nocolor",
            "-c",
            f"%load_ext jupyter_determined\n%det attach {trial['id']} print('best is', best)",
        ],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert "best is 41" in magic.stdout, magic.stdout + magic.stderr
    result = det(
        master, "t", "attach", str(trial["id"]), "-c", "%debug", stdin="where\np best * 2\nq\n"
    )
    assert result.returncode == 0, result.stderr
    assert "raise ValueError('boom at step 7')" in result.stdout, result.stdout
    assert "s.py" in result.stdout and "step()" in result.stdout
    assert "82" in result.stdout
    # The kept kernel ends with the master.
    master.stop()
    wait_until(lambda: gateway_kernels(gateway) == [], 30, "the kept kernel to end")
