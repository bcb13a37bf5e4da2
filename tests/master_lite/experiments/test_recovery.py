"""The recovery part: a store left by a master that died while a trial ran."""

from __future__ import annotations

import asyncio

from tests._support.parts import SINGLE, settle, started_parts


def test_a_run_left_by_a_dead_master_is_ended_and_its_trial_resumed(tmp_path):
    root = tmp_path / "root"

    async def first_master() -> tuple[int, int]:
        async with started_parts(root) as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            assert runner.launched  # then the master "dies": nothing records the run's end
            return exp["id"], trial["id"]

    exp_id, trial_id = asyncio.run(first_master())

    async def second_master() -> None:
        async with started_parts(root) as (parts, runner):
            assert parts.views.trial_row(trial_id).run_id == 1
            parts.recovery.recover()
            # The old allocation is ended as a master stop, and the trial's second run starts.
            ended = parts.runs.allocation_row(f"trial-{trial_id}.1")
            assert (ended.state, ended.end_intent) == ("ENDED", "master-stop")
            assert [spec.allocation_id for spec in runner.launched] == [f"trial-{trial_id}.2"]
            lines = [r["line"] for r in parts.logs.get_logs(trial_id, stream="master")]
            assert any("was running when the master stopped" in line for line in lines)
            # The searcher came back from its snapshot: the resumed run completing its op
            # finishes the experiment.
            assert parts.searchers.get(exp_id) is not None
            parts.reports.complete_operation(trial_id, 10, 0.1)
            runner.exit(f"trial-{trial_id}.2", 0)
            await settle(lambda: parts.views.get_experiment(exp_id)["state"] == "COMPLETED")
            assert parts.views.get_trial(trial_id)["state"] == "COMPLETED"

    asyncio.run(asyncio.wait_for(second_master(), 60))
