"""A TensorBoard whose experiment is deleted while it runs, over a real store and a real
TensorBoard process read over HTTP."""

from __future__ import annotations

import asyncio

from master_lite._parts._tensorboards import RUNNING
from tests._support import wait_until_async
from tests._support.parts import SINGLE, settle, started_parts
from tests.master_lite.test_parts_tensorboards import api


def test_deleting_one_of_its_experiments_leaves_a_tensorboard_following_the_others(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            boards = parts.tensorboards
            boards.refresh_seconds = 1
            gone = parts.experiments.create_experiment(SINGLE, None)
            [gone_trial] = parts.views.list_trials(gone["id"])
            kept = parts.experiments.create_experiment(SINGLE, None)
            [kept_trial] = parts.views.list_trials(kept["id"])
            for trial in (gone_trial, kept_trial):
                parts.reports.report_metrics(
                    trial["id"],
                    [{"group": "training", "steps_completed": 5, "metrics": {"loss": 0.5}}],
                )

            async def kill(experiment: dict, trial: dict) -> None:
                parts.experiments.experiment_action(experiment["id"], "kill")
                [launched] = [a for a in runner.launched if a.trial_id == trial["id"]]
                runner.exit(launched.allocation_id, 137)
                await settle(
                    lambda: parts.views.experiment_row(experiment["id"]).state == "CANCELED"
                )

            await kill(gone, gone_trial)  # finished, so that it may be deleted
            started = await boards.start([gone["id"], kept["id"]], [])
            await wait_until_async(
                lambda: boards.get(started["id"])["state"] == RUNNING,
                90,
                "TensorBoard serving",
                0.1,
            )
            port = started["port"]

            parts.edits.delete_experiment(gone["id"])
            # The other experiment reports once more, then ends too: the board's refreshes
            # still bring its last report to TensorBoard.
            parts.reports.report_metrics(
                kept_trial["id"],
                [{"group": "training", "steps_completed": 10, "metrics": {"loss": 0.25}}],
            )
            await kill(kept, kept_trial)
            run = f"experiment_{kept['id']}/trial_{kept_trial['id']}"

            async def shows_step_10() -> bool:
                points = await api(
                    port, "/data/plugin/scalars/scalars", run=run, tag="training/loss"
                )
                return [step for _, step, _ in points] == [5, 10]

            await wait_until_async(shows_step_10, 60, "step 10 of the kept experiment shown")
            # The board follows only what still exists.
            board = boards.get(started["id"])
            assert board["experimentIds"] == [kept["id"]]
            assert board["trialIds"] == [kept_trial["id"]]
            await boards.kill(started["id"])

    asyncio.run(asyncio.wait_for(body(), 150))
