"""Issue 26 row 6, kernel trials: a trial running in a local Jupyter kernel (standalone master,
and a master hosted in a Jupyter server, whose kernel manager starts it) cannot read the user
token, the store or (hosted) Jupyter's runtime dir, nor see the master through /proc — while it
trains, checkpoints and reports; and such a kernel can still be attached to and interrupted
(a Pause), and ends with the process that started it.

The trial plays the attacker with the process trial's script (`test_trial_sandbox.TRIAL`),
plus a look into Jupyter's runtime dir (the server's token and its kernels' keys).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from master_lite.runners.process import SANDBOX_ENV, process_group_alive
from tests._support import (
    MasterProcess,
    context_tarball,
    marked_values,
    wait_for_experiment,
    wait_until,
)
from tests._support.jupyter import JupyterServer
from tests.master_lite.runners.kernel.test_attach import LOOP, det, kernel_experiment
from tests.master_lite.runners.kernel.test_kernels import kernel_pids
from tests.reliability.test_trial_sandbox import MARKER, TRIAL, _sandbox_problem

pytestmark = pytest.mark.slow

# The process trial's script, with Jupyter's runtime dir looked at too.
KERNEL_TRIAL = TRIAL.replace(
    "# Whatever looked like a token",
    'attempt("runtime_listing", lambda: sorted(os.listdir(os.environ["RUNTIME"])))\n'
    "# Whatever looked like a token",
)
assert "runtime_listing" in KERNEL_TRIAL


@pytest.fixture(autouse=True)
def _needs_namespaces() -> None:
    problem = _sandbox_problem()
    if problem:
        pytest.skip(f"this platform cannot sandbox trials: {problem}")


def _config(root: Path, master_pid: int, runtime: Path) -> dict:
    return {
        "name": "snoop-kernel",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "environment": {
            "kernel": {},
            "environment_variables": [
                f"ROOT={root.absolute()}",
                f"MASTER_PID={master_pid}",
                f"RUNTIME={runtime}",
            ],
        },
    }


def _assert_cut_off(report: dict, token: str, logs: str) -> None:
    assert report["token_file"] == "FileNotFoundError"
    assert report["private_listing"] == "[]"
    assert report["master_db"] in ("PermissionError", "OSError")
    assert report["master_db_sql"] == "OperationalError"
    assert report["proc_root"] == "FileNotFoundError"
    assert report["proc_environ"] == "FileNotFoundError"
    assert report["signal_master"] == "ProcessLookupError"
    assert report["own_env_token"] == "KeyError"
    assert report["accepted_tokens"] == 0
    assert token not in logs


def _run_standalone(root: Path, env: dict[str, str] | None = None) -> tuple[MasterProcess, dict]:
    master = MasterProcess(root, cpu_slots=1, env=env)
    runtime = root / "no-runtime"  # a standalone master hides no runtime dir
    config = _config(root, master.pid, runtime)
    exp_id = master.create_experiment(config, context_tarball({"train.py": KERNEL_TRIAL}))
    experiment = wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    lines = "\n".join(master.logs(trial["id"]))
    assert experiment["state"] == "COMPLETED", lines
    (report,) = marked_values(lines, MARKER)
    return master, {"report": report, "trial": trial, "logs": lines}


def test_a_kernel_trial_cannot_reach_the_user_token(tmp_path: Path) -> None:
    root = tmp_path / "root"
    master, seen = _run_standalone(root)
    with master:
        # Outside the sandbox, as the same user, everything it looked for is there.
        assert (root / "private" / "user_token").read_text().strip() == master.token
        _assert_cut_off(seen["report"], master.token, seen["logs"])
        assert "in the trial sandbox" in seen["logs"]
        assert "token_file" in seen["report"]["master_json"]
        # The trial itself ran normally in its kernel: checkpoint and metrics stored.
        trial = master.session.get(f"/trials/{seen['trial']['id']}")["trial"]
        assert trial["latest_checkpoint"]
        assert master.series(seen["trial"]["id"], "validation") == [(1, {"loss": 0.5})]


def test_without_the_sandbox_the_kernel_trial_finds_the_token(tmp_path: Path) -> None:
    """What the sandbox prevents (the check of the test above: it sees the difference)."""
    master, seen = _run_standalone(tmp_path / "root", env={SANDBOX_ENV: "0"})
    with master:
        assert "in the trial sandbox" not in seen["logs"]
        assert seen["report"]["token_file"].strip() == master.token
        assert seen["report"]["accepted_tokens"] == 1


def test_a_sandboxed_kernel_trial_is_attached_to_and_paused(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master(env={"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "1"})
    exp_id = kernel_experiment(master, LOOP)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: "looping" in master.logs(trial["id"]), 60, "the loop to start")
    # Attached code runs in the kernel, over loopback ports as before: and in the sandbox.
    token_file = master.root_dir / "private" / "user_token"
    code = (
        f"import os; print('STEP', step > 0, os.path.exists({str(token_file)!r}), "
        f"os.path.exists({str(master.root_dir / 'master.db')!r}))"
    )
    result = det(master, "t", "attach", str(trial["id"]), "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "STEP True False True"
    assert any("in the trial sandbox" in line for line in master.logs(trial["id"]))
    # A Pause: the loop ignores it, so the kernel is interrupted (SIGINT to its process
    # group reaches the kernel inside the sandbox), then the run ends with 143.
    master.session.post(f"/experiments/{exp_id}/pause")
    wait_until(lambda: master.trials(exp_id)[0]["state"] == "PAUSED", 60, "the trial to pause")
    logs = master.logs(trial["id"])
    assert any("KeyboardInterrupt" in line for line in logs), logs
    assert any(line.startswith(f"trial-{trial['id']}.1 exited with code 143") for line in logs)
    assert kernel_pids(master, f"trial-{trial['id']}.1") == []


STARTER = """
import os, sys, time
from master_lite.runners.kernel._handles import LocalKernel
from master_lite.runners.kernel._sandbox import sandboxed
from master_lite.runners.process import Sandbox
hidden = sys.argv[1]
kernel = LocalKernel("python3", dict(os.environ), hidden + "/..",
                     Sandbox().prefix([hidden], watch_parent=True))
print(kernel.pid, sandboxed(kernel.manager), flush=True)
time.sleep(600)
"""


def test_a_sandboxed_kernel_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    """ipykernel's own parent poller is off in the sandbox (its parent there is PID 1): the
    trampoline watches the starting process instead (a master SIGKILLed leaves no kernel)."""
    hidden = tmp_path / "private"
    hidden.mkdir()
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(hidden)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert starter.stdout is not None
        pid, sandboxed = starter.stdout.readline().split()
        assert sandboxed == "True"
        assert process_group_alive(int(pid))  # the kernel leads its own group, as before
        starter.send_signal(signal.SIGKILL)
        starter.wait(30)
        wait_until(lambda: not process_group_alive(int(pid)), 30, "the kernel to end")
    finally:
        starter.kill()
        starter.wait(30)


def test_a_hosted_masters_kernel_trial_cannot_read_jupyters_runtime_dir(
    start_jupyter: Callable[..., JupyterServer],
) -> None:
    server = start_jupyter(app="jupyter_server")
    runtime = server.tmp / "runtime"
    config = _config(server.root_dir, server.pid, runtime)
    body = {"config": json.dumps(config), "context": context_tarball({"train.py": KERNEL_TRIAL})}
    exp_id = server.api("POST", "experiments", json=body)["experiment"]["id"]
    experiment = server.wait_experiment(exp_id)
    (trial,) = server.api("GET", f"experiments/{exp_id}/trials")["trials"]
    logs = server.trial_logs(trial["id"])
    assert experiment["experiment"]["state"] == "COMPLETED", logs
    (report,) = marked_values(logs, MARKER)
    # Outside: the server's own files (its token) are in the runtime dir.
    assert any(name.startswith("jpserver-") for name in os.listdir(runtime))
    assert report["runtime_listing"] == "[]"
    token_file = server.root_dir / "private" / "user_token"
    token = token_file.read_text().strip() if token_file.exists() else server.token
    _assert_cut_off(report, token, logs)
    assert server.token not in logs
    assert "in the trial sandbox" in logs
