"""Pause on a quickstart-style loop, one that never checks `should_preempt()` nor saves a
checkpoint (issue 28 item 1): until its run has really exited the trial says its run is
STOPPING (reason: pause), the loop's log says once what is going on, and Activate starts it
over from scratch with Steps and progress starting over too."""

from __future__ import annotations

import pytest

from tests._support.master import submit, trial_logs, trials
from tests._support.waiting import wait_until

pytestmark = pytest.mark.slow

NEVER_CHECKS = """
import logging, os, time
import determined as det

logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        for step in range(1, 100000):
            time.sleep(0.05)
            core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0})
            core_context.train.report_progress(step / 100000)
        op.report_completed(1.0)
"""
NOTE = "does not check core_context.preempt.should_preempt()"


def test_pause_shows_stopping_until_the_run_exits_then_activate_starts_over(
    start_master,
) -> None:
    master = start_master(env={"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "3"})
    config = {
        "name": "never-checks",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 100000},
    }
    exp_id = submit(master, config, {"train.py": NEVER_CHECKS})

    def trial() -> dict:
        return trials(master, exp_id)[0]

    first = wait_until(
        lambda: (t := trial())["steps_completed"] >= 5 and t, what="the trial to train"
    )
    assert first["run_state"] == "RUNNING" and first["stop_reason"] is None
    master.session.post(f"/experiments/{exp_id}/pause")

    # The experiment reads PAUSED at once (Determined's contract), but its trial's run still
    # trains: STOPPING with the reason, until it has exited.
    paused = master.session.get(f"/experiments/{exp_id}")["experiment"]
    assert paused["state"] == "PAUSED"
    stopping = trial()
    assert stopping["run_state"] == "STOPPING", stopping
    assert stopping["stop_reason"] == "pause"
    # The experiment says so too, in its own JSON and in the list the sidebar's table reads
    # (which shows PAUSING and disables Pause/Activate from it).
    assert paused["run_state"] == "STOPPING", paused
    listed = {e["id"]: e for e in master.session.get("/experiments")["experiments"]}
    assert listed[exp_id]["run_state"] == "STOPPING", listed[exp_id]

    def logs() -> list[str]:
        return [e["line"] for e in trial_logs(master, first["id"])]

    wait_until(lambda: any(NOTE in line for line in logs()), what="the once-only note")
    exited = wait_until(
        lambda: (t := trial())["run_state"] is None and t, what="the run to exit", timeout=60
    )
    assert exited["state"] == "PAUSED" and exited["stop_reason"] is None
    settled = master.session.get(f"/experiments/{exp_id}")["experiment"]
    assert settled["state"] == "PAUSED" and settled["run_state"] is None, settled
    notes = [line for line in logs() if NOTE in line]
    assert len(notes) == 1, notes
    assert "(user pause)" in notes[0] and "in 3 s" in notes[0]
    old_steps = exited["steps_completed"]
    assert old_steps >= 5

    # Activate: no checkpoint, so the run starts over, and so do its Steps and progress.
    master.session.post(f"/experiments/{exp_id}/activate")
    second = wait_until(
        lambda: (t := trial())["run_id"] == 2 and t["run_state"] == "RUNNING" and t,
        what="the second run",
    )
    assert second["steps_completed"] < old_steps, (second["steps_completed"], old_steps)
    assert any("restarting from scratch" in line for line in logs())
