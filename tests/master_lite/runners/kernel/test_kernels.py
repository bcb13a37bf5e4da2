"""Trials in Jupyter kernels through a real master: a search, pause/activate, a kernel killed
with SIGKILL, exit statuses, kill, and the config errors (real ipykernel kernels from the
`python3` kernelspec)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from determined.common.api import errors as api_errors
from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    all_logs,
    assert_clean_series,
    reported_steps,
    resumed_from,
    submit,
    wait_for_experiment,
    wait_until,
)

FILES = {"train.py": CHECKPOINTING_SCRIPT}
SINGLE = {"name": "single"}


def config(
    *, searcher: dict, step_sleep: float, max_restarts: int = 0, kernel: dict | None = None
) -> dict:
    return {
        "name": "kernels",
        "entrypoint": "python3 train.py",
        "max_restarts": max_restarts,
        "hyperparameters": {"increment_by": {"type": "int", "minval": 1, "maxval": 8}},
        "searcher": {"metric": "x", "max_length": 100, **searcher},
        "environment": {
            "kernel": {} if kernel is None else kernel,
            "environment_variables": [f"STEP_SLEEP={step_sleep}"],
        },
    }


def kernel_pids(master: MasterProcess, allocation_id: str) -> list[int]:
    """Kernel processes (ipykernel_launcher) running `allocation_id` of `master` (its root dir
    holds their work dirs: other masters on the machine number their trials from 1 too); not
    the processes of the trial sandbox around a kernel."""
    found = []
    marker = f"DET_ALLOCATION_ID={allocation_id}".encode()
    root = os.path.realpath(master.root_dir)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                command = f.read()
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if b"_sandbox_main.py" in command:  # the trial sandbox's trampoline, not the kernel
            continue
        if marker in environ and b"ipykernel_launcher" in command and cwd.startswith(root):
            found.append(int(entry.name))
    return found


def test_a_search_of_four_trials_runs_in_kernels(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    exp_id = submit(
        master, config(searcher={"name": "random", "max_trials": 4}, step_sleep=0.01), FILES
    )
    state = wait_for_experiment(master, exp_id)["state"]
    assert state == "COMPLETED", all_logs(master, exp_id)
    trials = master.trials(exp_id)
    assert len(trials) == 4 and {t["state"] for t in trials} == {"COMPLETED"}
    for trial in trials:
        assert_clean_series(master, trial)
        logs = master.logs(trial["id"])
        assert any(line.startswith("kernel 'python3' started (pid ") for line in logs), logs
        assert "starting at step 0 with x 0" in logs
        steps = [
            c["steps_completed"]
            for c in master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
            if c["trial_id"] == trial["id"]
        ]
        assert sorted(steps) == [30, 60, 90, 100]
        assert kernel_pids(master, f"trial-{trial['id']}.1") == []


def test_pause_and_activate_resume_the_kernel_trial_from_its_checkpoint(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    exp_id = submit(master, config(searcher=SINGLE, step_sleep=0.1), FILES)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: 30 in reported_steps(master, trial["id"]), 60, "step 30")
    master.session.post(f"/experiments/{exp_id}/pause")
    wait_for_experiment(master, exp_id, {"PAUSED"})
    wait_until(lambda: master.trials(exp_id)[0]["state"] == "PAUSED", 60, "the trial to pause")
    (paused_at,) = [
        int(line.split()[-1])
        for line in master.logs(trial["id"])
        if line.startswith("preempted at step ")
    ]
    assert paused_at < 100, "the trial finished before the pause reached it"
    assert kernel_pids(master, f"trial-{trial['id']}.1") == []
    master.session.post(f"/experiments/{exp_id}/activate")
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    assert resumed_from(master, trial["id"]) == [0, paused_at]
    assert_clean_series(master, trial)


def test_a_kernel_killed_with_sigkill_restarts_the_trial(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    exp_id = submit(master, config(searcher=SINGLE, step_sleep=0.05, max_restarts=1), FILES)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: 40 in reported_steps(master, trial["id"]), 60, "step 40")
    (pid,) = kernel_pids(master, f"trial-{trial['id']}.1")
    os.kill(pid, signal.SIGKILL)
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    assert trial["restarts"] == 1 and trial["run_id"] == 2
    assert "the trial's kernel died (exit status -9)" in master.logs(trial["id"])
    starts = resumed_from(master, trial["id"])
    assert starts[0] == 0 and starts[1] >= 30 and starts[1] % 30 == 0, starts
    assert_clean_series(master, trial)


EXITS = {
    "exit3.py": "import sys\nprint('about to exit')\nsys.exit(3)\n",
    "boom.py": "best = 41\ndef step():\n    raise ValueError('boom at step 7')\nstep()\n",
    "message.py": "import sys\nsys.exit('no data found')\n",
    "hooked.py": "import sys\nsys.excepthook = lambda t, v, tb: print('HOOK', t.__name__, v)\n"
    "raise KeyError('k')\n",
    "args.py": "import sys\nprint('ARGV', sys.argv[1:], __name__)\n",
}


@pytest.mark.parametrize(
    ("entrypoint", "exit_code", "line"),
    [
        ("python3 exit3.py", 3, "about to exit"),
        ("python3 boom.py", 1, "ValueError: boom at step 7"),
        ("python3 message.py", 1, "no data found"),
        ("python3 args.py --lr 0.1", 0, "ARGV ['--lr', '0.1'] __main__"),
        # The program's own excepthook hears of its failure, as in a process.
        ("python3 hooked.py", 1, "HOOK KeyError 'k'"),
    ],
)
def test_the_programs_exit_status_and_output_are_the_trials(
    start_master: Callable[..., MasterProcess], entrypoint: str, exit_code: int, line: str
) -> None:
    master = start_master()
    cfg = {
        **config(searcher=SINGLE, step_sleep=0, kernel={"keep_alive": 0}),
        "entrypoint": entrypoint,
    }
    exp_id = submit(master, cfg, EXITS)
    wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    assert trial["exit_code"] == exit_code, all_logs(master, exp_id)
    assert trial["state"] == ("COMPLETED" if exit_code == 0 else "ERROR")
    assert line in master.logs(trial["id"])
    assert kernel_pids(master, f"trial-{trial['id']}.1") == []


def test_killing_the_experiment_ends_its_kernel(start_master: Callable[..., MasterProcess]) -> None:
    master = start_master()
    exp_id = submit(master, config(searcher=SINGLE, step_sleep=0.2), FILES)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: 10 in reported_steps(master, trial["id"]), 60, "step 10")
    master.session.post(f"/experiments/{exp_id}/kill")
    assert wait_for_experiment(master, exp_id)["state"] == "CANCELED"
    (trial,) = master.trials(exp_id)
    assert trial["state"] == "CANCELED"
    wait_until(lambda: kernel_pids(master, f"trial-{trial['id']}.1") == [], 30, "the kernel to end")


def test_what_a_kernel_cannot_run_is_refused_at_submit(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    cfg = config(searcher=SINGLE, step_sleep=0, kernel={"spec": "no-such-kernel"})
    cfg["entrypoint"] = "sh -c 'python3 train.py'"
    cfg["resources"] = {"slots_per_trial": 2}
    with pytest.raises(api_errors.APIError) as info:
        submit(master, cfg, FILES)
    message = str(info.value)
    assert "environment.kernel.spec: no kernelspec named 'no-such-kernel'" in message
    assert "installed: python3" in message
    assert "entrypoint: \"sh -c 'python3 train.py'\" cannot run in a kernel" in message
    assert "resources.slots_per_trial: 2 slots cannot run in one kernel" in message
    cfg = config(searcher=SINGLE, step_sleep=0, kernel={"keep_alive": -1})
    with pytest.raises(api_errors.APIError) as info:
        submit(master, cfg, FILES)
    assert "environment.kernel.keep_alive" in str(info.value)
    assert master.session.get("/experiments")["experiments"] == []


def test_a_startup_hook_is_refused_when_the_run_starts(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    files = {**FILES, "startup-hook.sh": "export X=1\n"}
    exp_id = submit(master, config(searcher=SINGLE, step_sleep=0), files)
    wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    assert trial["state"] == "ERROR"
    logs = "\n".join(master.logs(trial["id"]))
    assert "startup-hook.sh: a kernel trial cannot source a shell startup hook" in logs


def test_a_crashed_masters_kernel_is_ended_and_its_trial_resumes(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    exp_id = submit(master, config(searcher=SINGLE, step_sleep=0.05, max_restarts=1), FILES)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: 30 in reported_steps(master, trial["id"]), 60, "step 30")
    (orphan,) = kernel_pids(master, f"trial-{trial['id']}.1")
    master.kill()  # SIGKILL: the kernel outlives it, as after a crash
    assert kernel_pids(master, f"trial-{trial['id']}.1") == [orphan]
    master.restart()
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED", all_logs(master, exp_id)
    assert kernel_pids(master, f"trial-{trial['id']}.1") == []
    (trial,) = master.trials(exp_id)
    assert resumed_from(master, trial["id"])[-1] >= 30
    assert_clean_series(master, trial)


@pytest.mark.parametrize("kernel", [{}, {"spec": "python3"}])
def test_runners_without_kernels_refuse_environment_kernel(kernel: dict) -> None:
    """What Ray's runner (and a deployment's own runner class) answers at submit time."""
    from tests.master_lite.runners.container.test_runtime import _NoContainers

    runner = _NoContainers(log_sink=lambda records: None, on_exit=lambda a, c: None)
    (problem,) = runner.config_problems({"environment": {"kernel": kernel}})
    assert problem.startswith(
        "environment.kernel: _NoContainers does not run trials in Jupyter kernels"
    )
    assert runner.config_problems({"environment": {"kernel": None}}) == []
