"""The experiments and searchers parts over a real store: creation, actions, trial ends."""

from __future__ import annotations

import asyncio

import pytest

from master_lite import errors
from tests._support.parts import SINGLE, settle, started_parts


def test_a_created_experiment_gets_its_searchers_trial_scheduled_and_launched(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            assert exp["state"] == "ACTIVE"
            # The single searcher's Create became a trial with its first ValidateAfter queued,
            # and the runs part launched it once the creation committed.
            [trial] = parts.views.list_trials(exp["id"])
            row = parts.views.trial_row(trial["id"])
            assert row.op_queue == [10]
            assert [spec.allocation_id for spec in runner.launched] == [f"trial-{trial['id']}.1"]
            assert parts.runs.is_running(trial["id"])
            assert trial["hparams"] == {"lr": 0.1}
            # The searcher's snapshot is stored with the experiment.
            stored = parts.views.experiment_row(exp["id"])
            assert stored.searcher_snapshot is not None
            assert parts.searchers.get(exp["id"]) is not None

    asyncio.run(asyncio.wait_for(body(), 60))


def test_pause_preempts_the_run_and_its_exit_pauses_the_trial(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            allocation_id = parts.runs.allocation_id_of(trial["id"])
            assert allocation_id is not None

            assert parts.experiments.experiment_action(exp["id"], "pause")["state"] == "PAUSED"
            assert await parts.runs.wait_preemption(allocation_id, 0) is True
            runner.exit(allocation_id, 0)
            await settle(lambda: not parts.runs.is_running(trial["id"]))
            assert parts.views.get_trial(trial["id"])["state"] == "PAUSED"

            # Activating schedules it again: a second run of the same trial.
            parts.experiments.experiment_action(exp["id"], "activate")
            assert parts.runs.allocation_id_of(trial["id"]) == f"trial-{trial['id']}.2"
            assert parts.views.get_trial(trial["id"])["state"] == "ACTIVE"

    asyncio.run(asyncio.wait_for(body(), 60))


def test_kill_ends_the_trial_canceled_and_the_experiment_once_the_run_exited(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            allocation_id = parts.runs.allocation_id_of(trial["id"])

            after = parts.experiments.experiment_action(exp["id"], "kill")
            assert after["state"] == "STOPPING_CANCELED"  # the run has not exited yet
            assert ("kill", allocation_id) in runner.calls
            runner.exit(allocation_id, -9)
            await settle(lambda: parts.views.get_experiment(exp["id"])["state"] == "CANCELED")
            assert parts.views.get_trial(trial["id"])["state"] == "CANCELED"
            with pytest.raises(errors.Conflict):
                parts.experiments.experiment_action(exp["id"], "pause")

    asyncio.run(asyncio.wait_for(body(), 60))


def test_an_experiment_that_cannot_start_its_searcher_is_refused_and_not_stored(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, _):
            bad = {**SINGLE, "searcher": {**SINGLE["searcher"], "source_trial_id": 99}}
            with pytest.raises(errors.InvalidRequest, match="trial 99 does not exist"):
                parts.experiments.create_experiment(bad, None)
            assert parts.views.list_experiments() == []

    asyncio.run(asyncio.wait_for(body(), 60))


def test_patch_experiment_changes_the_fields_given_in_any_state(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            changed = parts.edits.patch_experiment(
                exp["id"], name="renamed", labels=["b", "a", "b"]
            )
            assert changed["name"] == "renamed" and changed["labels"] == ["b", "a"]
            assert changed["description"] == exp["description"]
            described = parts.edits.patch_experiment(exp["id"], description="about it")
            assert described["description"] == "about it" and described["name"] == "renamed"
            assert parts.views.experiment_row(exp["id"]).labels == ["b", "a"]
            with pytest.raises(errors.InvalidRequest, match="name"):
                parts.edits.patch_experiment(exp["id"], name="  ")
            with pytest.raises(errors.InvalidRequest, match="label"):
                parts.edits.patch_experiment(exp["id"], labels=["ok", ""])
            with pytest.raises(errors.NotFound, match="experiment 999 not found"):
                parts.edits.patch_experiment(999, name="x")

    asyncio.run(asyncio.wait_for(body(), 60))
