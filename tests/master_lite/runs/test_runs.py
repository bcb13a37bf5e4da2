"""The runs part (with its preemption and run-exits sides) over a real store."""

from __future__ import annotations

import asyncio
import json

from master_lite._core import _auth
from master_lite.runs import authenticate
from tests._support.parts import SINGLE, settle, started_parts


def test_a_failed_run_is_restarted_then_ends_the_trial_as_error(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)  # max_restarts: 1
            [trial] = parts.views.list_trials(exp["id"])
            spec = runner.launched[0]
            assert spec.env["DET_TRIAL_ID"] == str(trial["id"])
            assert spec.env["DET_MASTER"] == "http://127.0.0.1:9"
            assert json.loads(spec.env["DET_SLOT_IDS"]) == [0]
            principal = authenticate(
                parts.shared.store, spec.env["DET_SESSION_TOKEN"], user_token="u"
            )
            assert isinstance(principal, _auth.TrialPrincipal)
            assert principal.allocation_id == spec.allocation_id

            runner.exit(spec.allocation_id, 3)
            await settle(lambda: len(runner.launched) == 2)
            assert parts.views.trial_row(trial["id"]).restarts == 1
            # The first run's token died with it.
            assert (
                authenticate(parts.shared.store, spec.env["DET_SESSION_TOKEN"], user_token="u")
                is None
            )

            runner.exit(runner.launched[1].allocation_id, 3)
            await settle(lambda: parts.views.get_experiment(exp["id"])["state"] == "ERROR")
            assert parts.views.get_trial(trial["id"])["state"] == "ERROR"
            assert parts.runs.resources()["slots"][0]["allocation_id"] is None
            lines = [log["line"] for log in parts.logs.get_logs(trial["id"], stream="master")]
            assert any("restart 1 of 1" in line for line in lines)

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_run_that_ignores_its_preemption_is_terminated_when_its_grace_ends(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root", grace=0.05) as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            allocation_id = parts.runs.allocation_id_of(trial["id"])
            assert parts.runs.resources()["slots"][0]["trial_id"] == trial["id"]

            parts.runs.preempt(allocation_id, "pause")
            await settle(lambda: ("terminate", allocation_id) in runner.calls)
            assert parts.runs.allocation_row(allocation_id).end_intent == "pause"
            runner.exit(allocation_id, -15)  # SIGTERM
            await settle(lambda: parts.runs.allocation_row(allocation_id).state == "ENDED")
            summary = parts.views.trial_row(trial["id"]).exit_summary
            assert "did not exit within 0.05s of the preemption signal" in summary

    asyncio.run(asyncio.wait_for(body(), 60))
