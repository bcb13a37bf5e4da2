"""Attach to kernel trials through a real master and the real `det` CLI: a live trial's globals
from a subshell while it trains, a failed trial's kernel kept for post-mortem (`best`,
`%debug` on the failing frame), keep_alive expiry, and the refusals."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable

from tests._support import MasterProcess, child_env, submit, wait_for_experiment, wait_until
from tests.master_lite.runners.kernel.test_kernels import SINGLE, config, kernel_pids

BOOM = """
best = 41
def step():
    raise ValueError('boom at step 7')
step()
"""
LOOP = """
import time
step = 0
stop = False
print("looping", flush=True)
while not stop:
    step += 1
    time.sleep(0.01)
print("stopped at", step)
"""


def det(master: MasterProcess, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )


def kernel_experiment(master: MasterProcess, script: str, **kernel: float) -> int:
    cfg = {
        **config(searcher=SINGLE, step_sleep=0, kernel=dict(kernel)),
        "entrypoint": "python3 s.py",
    }
    return submit(master, cfg, {"s.py": script})


def failed_kernel_trial(master: MasterProcess, keep_alive: float) -> tuple[int, dict]:
    """Run BOOM in a kernel until it fails; (experiment id, its trial)."""
    exp_id = kernel_experiment(master, BOOM, keep_alive=keep_alive)
    wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    return exp_id, trial


def test_a_failed_trials_kernel_answers_best_and_debug_shows_the_failing_frame(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    exp_id, trial = failed_kernel_trial(master, keep_alive=300)
    assert trial["state"] == "ERROR" and trial["exit_code"] == 1
    # The run is over (its slots are free) while its kernel waits for a debugger.
    assert trial["allocation_id"] is None or trial["run_state"] != "RUNNING"
    (pid,) = kernel_pids(master, f"trial-{trial['id']}.1")
    info = master.session.get(f"/trials/{trial['id']}/kernel")
    assert info["post_mortem"] is True and info["kernel"]["shell_port"] > 0
    assert (
        "the failed trial's kernel stays up for 300 s so you can attach to it "
        f"(`det trial attach {trial['id']}`) and run %debug"
    ) in master.logs(trial["id"])

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

    # What JupyterLab's Attach opens for a kernel it did not start (a gateway's): a console whose
    # cells `%det attach ID --console` forwards; `%debug`'s prompts are answered in that console
    # (here IPython reading its stdin).
    console = subprocess.run(
        [sys.executable, "-m", "IPython", "--no-banner", "--colors=nocolor", "--simple-prompt"],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        input=(
            f"%load_ext jupyter_determined\n%det attach {trial['id']} --console\n"
            "print('best is', best)\n%debug\nwhere\np best * 3\nq\n%det detach\n"
        ),
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    out = re.sub(r"\x1b\[[0-9;]*m", "", console.stdout)  # the trial kernel's colours
    assert f"Attached to trial {trial['id']}'s kernel (post-mortem)" in out, out + console.stderr
    assert "best is 41" in out and "123" in out, out + console.stderr
    assert "raise ValueError('boom at step 7')" in out and "Detached." in out, out
    master.stop()
    wait_until(
        lambda: kernel_pids(master, f"trial-{trial['id']}.1") == [], 30, "the kept kernel to end"
    )
    del pid


def test_deleting_the_experiment_ends_its_kept_kernel(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    exp_id, trial = failed_kernel_trial(master, keep_alive=300)
    (pid,) = kernel_pids(master, f"trial-{trial['id']}.1")
    master.session.delete(f"/experiments/{exp_id}")
    # Not after keep_alive's 300 s: its experiment and work dir are gone, so is the kernel.
    wait_until(lambda: kernel_pids(master, f"trial-{trial['id']}.1") == [], 30, "the kernel to end")
    del pid


def test_the_kept_kernel_ends_after_keep_alive_and_attach_then_says_why(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    _, trial = failed_kernel_trial(master, keep_alive=1)
    wait_until(
        lambda: kernel_pids(master, f"trial-{trial['id']}.1") == [], 30, "keep_alive to expire"
    )
    result = det(master, "t", "attach", str(trial["id"]), "-c", "best")
    assert result.returncode != 0
    assert f"trial {trial['id']} has no kernel to attach to: it is ERROR" in result.stderr
    assert "keep_alive = 1 s" in result.stderr


def test_attach_during_a_run_reads_and_sets_live_globals_in_a_subshell(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    exp_id = kernel_experiment(master, LOOP)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: "looping" in master.logs(trial["id"]), 60, "the loop to start")
    # The main shell is busy with the loop: only a subshell can answer.
    result = det(master, "t", "attach", str(trial["id"]), "-c", "print('STEP', step > 0, stop)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "STEP True False"
    # While attached code runs, the training loop goes on (the subshell has its own thread):
    # the attached code waits to see `step` move, which it could not if it held the loop up.
    moved = (
        "import time\n"
        "seen, deadline = step, time.monotonic() + 60\n"
        "while step == seen and time.monotonic() < deadline:\n"
        "    time.sleep(0.001)\n"
        "print('MOVED', step > seen)"
    )
    result = det(master, "t", "attach", str(trial["id"]), "-c", moved)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "MOVED True"
    result = det(master, "t", "attach", str(trial["id"]), "-c", "stop = True")
    assert result.returncode == 0, result.stderr
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    assert any(line.startswith("stopped at ") for line in master.logs(trial["id"]))
    result = det(master, "t", "attach", str(trial["id"]))
    assert result.returncode != 0
    assert "it is COMPLETED and its kernel has been shut down" in result.stderr


def test_attach_to_a_process_trial_is_refused(start_master: Callable[..., MasterProcess]) -> None:
    master = start_master()
    cfg = config(searcher=SINGLE, step_sleep=0)
    del cfg["environment"]["kernel"]
    cfg["entrypoint"] = "python3 s.py"
    exp_id = submit(master, cfg, {"s.py": "print('hi')"})
    wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    result = det(master, "t", "attach", str(trial["id"]))
    assert result.returncode != 0
    assert f"trial {trial['id']} does not run in a kernel" in result.stderr


def test_a_trial_that_ignores_a_pause_is_interrupted_in_its_kernel(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master(env={"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "1"})
    exp_id = kernel_experiment(master, LOOP)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: "looping" in master.logs(trial["id"]), 60, "the loop to start")
    master.session.post(f"/experiments/{exp_id}/pause")
    wait_for_experiment(master, exp_id, {"PAUSED"})
    wait_until(lambda: master.trials(exp_id)[0]["state"] == "PAUSED", 60, "the trial to pause")
    (trial,) = master.trials(exp_id)
    logs = master.logs(trial["id"])
    assert any("KeyboardInterrupt" in line for line in logs), logs
    # As a process stopped with SIGTERM after the grace.
    assert any(line.startswith(f"trial-{trial['id']}.1 exited with code 143") for line in logs), (
        logs
    )
    assert kernel_pids(master, f"trial-{trial['id']}.1") == []
