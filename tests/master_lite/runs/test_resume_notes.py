"""What a trial's log says when a run does not continue where the last one stopped (issue 28,
item 7): a restart, an Activate or an ASHA promotion of a trial that trained but saved no
checkpoint starts from step 0 again, and the master says so once, in the trial's log."""

from __future__ import annotations

import pytest

from tests._support.master import submit, trial_logs, trials, wait_for_experiment

pytestmark = pytest.mark.slow

FAILS_FIRST_WITHOUT_CHECKPOINT = """
import os, sys
import determined as det

with det.core.init() as core_context:
    for step in (1, 2, 3):
        core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0})
if os.environ["DET_TRIAL_RUN_ID"] == "1":
    sys.exit(1)  # the first run fails, having saved no checkpoint
"""
CHECKPOINTS_THEN_FAILS = """
import os, sys
import determined as det

with det.core.init() as core_context:
    for step in (1, 2, 3):
        core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0})
    with core_context.checkpoint.store_path({"steps_completed": 3}) as (path, _):
        (path / "w").write_text("w")
if os.environ["DET_TRIAL_RUN_ID"] == "1":
    sys.exit(1)
"""


def config(name: str) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 1,
        "searcher": {"name": "single", "metric": "loss", "max_length": 3},
    }


def test_a_restart_without_a_checkpoint_says_it_starts_over(start_master) -> None:
    master = start_master()
    exp_id = submit(master, config("no-checkpoint"), {"train.py": FAILS_FIRST_WITHOUT_CHECKPOINT})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    [trial] = trials(master, exp_id)
    assert trial["restarts"] == 1
    lines = [e["line"] for e in trial_logs(master, trial["id"])]
    assert [line for line in lines if "from scratch" in line] == [
        "restarting from scratch: no checkpoint (the trial trained 3 steps but saved none to "
        "resume from; save checkpoints with core_context.checkpoint and resume from "
        "get_cluster_info().latest_checkpoint)"
    ]
    # Said where the second run begins: right before its start line.
    said = next(i for i, line in enumerate(lines) if "from scratch" in line)
    assert lines[said + 1].startswith(f"starting trial-{trial['id']}.2 ")


def test_a_restart_from_a_checkpoint_does_not(start_master) -> None:
    master = start_master()
    exp_id = submit(master, config("with-checkpoint"), {"train.py": CHECKPOINTS_THEN_FAILS})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    [trial] = trials(master, exp_id)
    assert trial["restarts"] == 1
    assert not [e for e in trial_logs(master, trial["id"]) if "from scratch" in e["line"]]
