"""What the trial JSON says about a run's end and wait: `exit_summary`, `run_state`,
`notebook_error` (the Master facade driven directly, with real trial subprocesses)."""

from __future__ import annotations

import asyncio
import signal

import pytest

from determined.common import notebook_errors
from master_lite._master import Master
from master_lite.runners import _exits
from tests._support import tar_gz, wait_until_async

pytestmark = pytest.mark.slow


def config(*, max_trials: int = 1, entrypoint: str = "python3 train.py") -> dict:
    return {
        "name": "exit-details",
        "entrypoint": entrypoint,
        "max_restarts": 0,
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_trials": max_trials,
            "max_length": {"batches": 10},
        },
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
    }


def with_master(cpu_slots: int = 2):
    """Run an async test body against a started master (short grace periods); always stop it."""

    def decorate(test):
        def wrapper(tmp_path):
            async def body():
                master = Master(
                    tmp_path / "root",
                    cpu_slots=cpu_slots,
                    gpus=[],
                    preemption_grace_seconds=1,
                    terminate_grace_seconds=1,
                )
                await master.start("http://127.0.0.1:9")
                try:
                    await test(master)
                finally:
                    await master.stop(pause_running=False)

            asyncio.run(asyncio.wait_for(body(), 120))

        wrapper.__name__ = test.__name__
        return wrapper

    return decorate


def until(predicate, timeout: float = 60.0, what: str = "condition"):
    """These tests' waits: polled often (a whole test has 120 s)."""
    return wait_until_async(predicate, timeout, what, 0.05)


def only_trial(master: Master, exp_id: int) -> dict:
    [trial] = master.views.list_trials(exp_id)
    return trial


def master_lines(master: Master, trial_id: int) -> list[str]:
    return [
        row["line"]
        for row in master.store.select("logs", "trial_id = ? AND stream = ?", (trial_id, "master"))
    ]


async def finished(master: Master, exp_id: int) -> None:
    await until(
        lambda: master.views.get_experiment(exp_id)["state"] in ("COMPLETED", "CANCELED", "ERROR"),
        what=f"experiment {exp_id} to end",
    )


async def ended(master: Master, exp_id: int) -> dict:
    """The only trial of experiment `exp_id`, once the experiment has ended."""
    await finished(master, exp_id)
    return only_trial(master, exp_id)


SLEEPER = "import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n"


# --- exit_summary -------------------------------------------------------------------------------


def test_exit_summaries_name_the_signal_and_why() -> None:
    assert _exits.exit_summary(0) is None and _exits.exit_summary(None) is None
    assert _exits.exit_summary(3) == "exited with code 3"
    assert _exits.exit_summary(128) == "exited with code 128"  # 128 + 0 is no signal
    assert _exits.exit_summary(255) == "exited with code 255"  # 127 is no signal
    assert _exits.exit_summary(137) == (
        "killed by signal SIGKILL (9): possibly out of memory "
        "(the kernel's OOM killer sends SIGKILL)"
    )
    assert _exits.exit_summary(-9) == _exits.exit_summary(137)  # a Popen return code
    assert _exits.exit_summary(139) == "killed by signal SIGSEGV (11): reason unknown"
    assert (
        _exits.exit_summary(137, signalled_because="killed by the user (trial 4 kill)")
        == "killed by signal SIGKILL (9): killed by the user (trial 4 kill)"
    )
    assert _exits.signal_of(143) == signal.SIGTERM and _exits.signal_of(1) is None


def test_determined_exit_lines_say_what_determined_says() -> None:
    assert _exits.determined_exit_line(0, container=False) is None
    assert _exits.determined_exit_line(None, container=True) is None
    assert _exits.determined_exit_line(1, container=True) == (
        "crashed: resources failed with non-zero exit code: container failed with non-zero "
        "exit code: 1 (exit code 1)"
    )
    assert _exits.determined_exit_line(-9, container=False, killed=True) == (
        "killed: resources failed with non-zero exit code: process failed with non-zero "
        "exit code: 137 (exit code 137)"
    )


@with_master()
async def test_a_sigkill_the_master_did_not_send_is_possibly_out_of_memory(master):
    script = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": script}))
    trial = await ended(master, exp["id"])
    assert trial["state"] == "ERROR" and trial["exit_code"] == 137
    assert trial["exit_summary"] == (
        "killed by signal SIGKILL (9): possibly out of memory (the "
        "kernel's OOM killer sends SIGKILL)"
    )
    assert trial["run_state"] is None
    assert any(
        line.endswith(f"exited with code 137: {trial['exit_summary']}")
        for line in master_lines(master, trial["id"])
    )
    assert master.views.get_trial(trial["id"])["exit_summary"] == trial["exit_summary"]


@with_master()
async def test_plain_and_shell_style_exit_codes(master):
    exp = master.experiments.create_experiment(config(entrypoint="exit 3"), None)
    trial = await ended(master, exp["id"])
    assert trial["exit_code"] == 3 and trial["exit_summary"] == "exited with code 3"
    lines = master_lines(master, trial["id"])
    assert f"trial-{trial['id']}.1 exited with code 3" in lines
    # ...and, next to ours, the line Determined's master writes (its users grep it).
    assert (
        "crashed: resources failed with non-zero exit code: process failed with non-zero exit "
        "code: 3 (exit code 3)"
    ) in lines
    # What a shell reports for a child killed by SIGSEGV: 128 + 11.
    exp = master.experiments.create_experiment(config(entrypoint="exit 139"), None)
    trial = await ended(master, exp["id"])
    assert trial["exit_summary"] == "killed by signal SIGSEGV (11): reason unknown"


@with_master()
async def test_a_killed_experiment_says_the_user_killed_it(master):
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": SLEEPER}))
    await until(lambda: only_trial(master, exp["id"])["run_state"] == "RUNNING", what="RUNNING")
    await until(
        lambda: any("sleeping" in row["line"] for row in master.store.select("logs")),
        what="the trial to start",
    )
    master.experiments.experiment_action(exp["id"], "kill")
    trial = await ended(master, exp["id"])
    assert trial["state"] == "CANCELED" and trial["exit_code"] == 137
    assert trial["exit_summary"] == (
        f"killed by signal SIGKILL (9): killed by the user (experiment {exp['id']} kill)"
    )
    assert (
        "killed: resources failed with non-zero exit code: process failed with non-zero exit "
        "code: 137 (exit code 137)"
    ) in master_lines(master, trial["id"])


@with_master()
async def test_a_run_that_ignores_the_pause_is_terminated_as_preempted(master):
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": SLEEPER}))
    await until(
        lambda: any("sleeping" in row["line"] for row in master.store.select("logs")),
        what="the trial to start",
    )
    master.experiments.experiment_action(exp["id"], "pause")
    await until(lambda: only_trial(master, exp["id"])["state"] == "PAUSED", what="PAUSED")
    trial = only_trial(master, exp["id"])
    assert trial["exit_summary"] == (
        "killed by signal SIGTERM (15): preempted (the experiment was paused) and terminated "
        "by the master: it did not exit within 1s of the preemption signal"
    )
    assert trial["run_state"] is None  # PAUSED: not waiting for a slot


# --- run_state ----------------------------------------------------------------------------------


@with_master(cpu_slots=1)
async def test_with_one_slot_the_second_trial_is_queued(master):
    exp = master.experiments.create_experiment(config(max_trials=2), tar_gz({"train.py": SLEEPER}))
    await until(
        lambda: (
            sorted(str(t["run_state"]) for t in master.views.list_trials(exp["id"]))
            == ["QUEUED", "RUNNING"]
        ),
        what="one trial RUNNING, one QUEUED",
    )
    trials = master.views.list_trials(exp["id"])
    assert all(trial["state"] == "ACTIVE" for trial in trials)
    running = next(t for t in trials if t["run_state"] == "RUNNING")
    queued = next(t for t in trials if t["run_state"] == "QUEUED")
    assert running["allocation_id"] is not None and running["slot_ids"] == [0]
    assert queued["allocation_id"] is None and queued["slot_ids"] == []
    assert master.views.get_trial(queued["id"])["run_state"] == "QUEUED"
    page = master.views.trials_page(exp["id"], order_by="-id")["trials"]
    assert {t["id"]: t["run_state"] for t in page} == {
        running["id"]: "RUNNING",
        queued["id"]: "QUEUED",
    }
    master.experiments.experiment_action(exp["id"], "kill")
    await finished(master, exp["id"])
    assert [t["run_state"] for t in master.views.list_trials(exp["id"])] == [None, None]


# --- notebook_error -----------------------------------------------------------------------------


@with_master()
async def test_the_marker_line_becomes_the_trials_notebook_error(master):
    record = {
        "notebook": "/work/nb.ipynb",
        "cell_id": "c3",
        "cell_index": 2,
        "line": 4,
        "exception": "ValueError: boom",
    }
    script = (
        "import sys\nprint('not a marker: DET_NOTEBOOK_ERROR {}', flush=True)\n"
        f"sys.stderr.write({notebook_errors.marker_line(record)!r} + '\\n')\n"
        # a second marker (another rank, a consequence) does not replace the first
        f"sys.stderr.write({notebook_errors.marker_line({**record, 'line': 9})!r} + '\\n')\n"
        "sys.exit(1)\n"
    )
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": script}))
    trial = await ended(master, exp["id"])
    assert trial["state"] == "ERROR"
    assert trial["notebook_error"] == record
    assert master.views.get_trial(trial["id"])["notebook_error"] == record


@with_master()
async def test_a_clean_trial_has_no_notebook_error(master):
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": "print('fine')\n"}))
    trial = await ended(master, exp["id"])
    assert trial["state"] == "COMPLETED"
    assert trial["notebook_error"] is None and trial["exit_summary"] is None


@with_master()
async def test_an_exported_notebook_names_the_failing_cell(master):
    """The whole path: export (jupyter_determined) -> the script's hook in the trial -> the
    traceback in the logs names the cell -> the master stores `notebook_error`."""
    from jupyter_determined.kernel._export import cells_to_script

    cells = [
        {"cell_type": "markdown", "source": "# Title", "id": "md"},
        {
            "cell_type": "code",
            "source": "import json\n\ndef check(x):\n"
            "    if x > 1:\n        raise ValueError('boom')\n",
            "id": "helpers",
            "execution_count": 1,
        },
        {"cell_type": "code", "source": "%%time\nvalue = 2\ncheck(value)\n", "id": "run"},
    ]
    exported = cells_to_script(cells, notebook_path="/work/quickstart.ipynb")
    exp = master.experiments.create_experiment(
        config(entrypoint="python3 _det_notebook_cell.py"),
        tar_gz({"_det_notebook_cell.py": exported.script}),
    )
    trial = await ended(master, exp["id"])
    assert trial["notebook_error"] == {
        "notebook": "/work/quickstart.ipynb",
        "cell_id": "helpers",
        "cell_index": 1,
        "line": 5,
        "exception": "ValueError: boom",
        "execution_count": 1,
        "code_number": 1,
        "first_line": "import json",
    }
    text = "\n".join(
        row["line"] for row in master.store.select("logs", "trial_id = ?", (trial["id"],))
    )
    # Cells as JupyterLab's prompts name them; one that had not run by the number people count.
    assert 'File "Cell In[ ] (code cell 2)", line 3, in <module>' in text
    assert 'File "Cell In[1]", line 5, in check' in text
    assert text.count("Traceback (most recent call last)") == 1
    assert "_det_notebook_cell.py" not in text.split("Traceback", 1)[1]
