"""The reports and checkpoints parts over a real store, with the searcher hearing reports."""

from __future__ import annotations

import asyncio

import pytest

from master_lite import errors
from tests._support.parts import SINGLE, started_parts

# Checkpoint uuids are UUIDs (the master refuses others).
CKPT_1 = "00000000-0000-4000-8000-0000000000c1"


def test_reports_move_the_best_validation_and_complete_the_searchers_operation(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            trial_id = trial["id"]
            assert await parts.reports.next_operation(trial_id, 0) == {
                "completed": False,
                "op": {"validateAfter": {"length": "10"}},
            }
            reports = [
                {"group": "validation", "steps_completed": 5, "metrics": {"loss": 0.5}},
                {"group": "validation", "steps_completed": 10, "metrics": {"loss": 0.2}},
                {"group": "training", "steps_completed": 10, "metrics": {"loss": 0.3}},
            ]
            assert parts.reports.report_metrics(trial_id, reports) == 3
            row = parts.views.trial_row(trial_id)
            assert row.steps_completed == 10
            assert parts.views.get_trial(trial_id)["searcher_metric"] == 0.2
            assert parts.views.best_validation(exp["id"]) == 0.2

            with pytest.raises(errors.InvalidRequest, match="no pending operation of length 7"):
                parts.reports.complete_operation(trial_id, 7, 0.2)
            parts.reports.complete_operation(trial_id, 10, 0.2)
            # The single searcher has nothing more for it: the run is told it is done.
            assert await parts.reports.next_operation(trial_id, 0) == {
                "completed": True,
                "op": None,
            }
            parts.reports.report_progress(trial_id, 2.0)  # clamped
            assert parts.views.trial_row(trial_id).progress == 1.0

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_reported_checkpoint_becomes_the_trials_latest_and_can_be_listed(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            allocation_id = runner.launched[0].allocation_id
            with pytest.raises(errors.InvalidRequest, match="is not a UUID"):
                parts.checkpoints.report_checkpoint(
                    {"uuid": "../x", "metadata": {"steps_completed": 1}}
                )
            # The trial is found from the allocation when the report names only that.
            checkpoint = parts.checkpoints.report_checkpoint(
                {
                    "uuid": CKPT_1,
                    "allocation_id": allocation_id,
                    "metadata": {"steps_completed": 10},
                    "resources": {"model.pt": 3},
                }
            )
            assert checkpoint["trial_id"] == trial["id"]
            assert checkpoint["state"] == "COMPLETED"
            assert parts.views.trial_row(trial["id"]).latest_checkpoint == CKPT_1
            listed = parts.checkpoints.list_checkpoints(experiment_id=exp["id"])
            assert [c["uuid"] for c in listed] == [CKPT_1]

            # A user's metadata edit replaces the master's record of it.
            edited = parts.checkpoints.set_checkpoint_metadata(
                CKPT_1, {"steps_completed": 10, "note": "best"}
            )
            assert edited["metadata"] == {"steps_completed": 10, "note": "best"}
            assert parts.checkpoints.get_checkpoint(CKPT_1)["metadata"]["note"] == "best"
            with pytest.raises(errors.NotFound, match="checkpoint nope not found"):
                parts.checkpoints.set_checkpoint_metadata("nope", {})

            parts.checkpoints.mark_checkpoints_deleted([{"uuid": CKPT_1}])
            assert parts.checkpoints.get_checkpoint(CKPT_1)["state"] == "DELETED"
            with pytest.raises(errors.NotFound):
                parts.checkpoints.checkpoint_archive(CKPT_1)

    asyncio.run(asyncio.wait_for(body(), 60))
