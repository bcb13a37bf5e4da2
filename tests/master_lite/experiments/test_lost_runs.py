"""A run lost with its place (a Ray node or the whole cluster: `Runner.lost_cause`) is not a
failure: its trial goes back to the queue without counting a restart, and its exit is told with
the runner's words, not "possibly out of memory" (docs/distributed.md, "Faults")."""

from __future__ import annotations

import asyncio

from tests._support.parts import SINGLE, settle, started_parts


def test_a_lost_run_is_requeued_uncounted_and_a_failed_one_still_counts(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            lost: dict[str, str] = {}
            runner.lost_cause = lambda allocation_id: lost.pop(allocation_id, None)  # type: ignore[method-assign]
            exp = parts.experiments.create_experiment(dict(SINGLE, max_restarts=0), None)
            [trial] = parts.views.list_trials(exp["id"])
            first = parts.runs.allocation_id_of(trial["id"])
            assert first is not None
            lost[first] = "node 10.0.0.2 (node id n2) was lost"
            runner.exit(first, 137)
            second = f"trial-{trial['id']}.2"
            await settle(lambda: parts.runs.allocation_id_of(trial["id"]) == second)
            row = parts.views.get_trial(trial["id"])
            assert (row["state"], row["restarts"]) == ("ACTIVE", 0)
            assert row["exit_summary"] == (
                "killed by signal SIGKILL (9): node 10.0.0.2 (node id n2) was lost"
            )

            runner.exit(second, 137)  # the run's own end: counted (max_restarts 0: ERROR)
            await settle(lambda: parts.views.get_trial(trial["id"])["state"] == "ERROR")
            assert "possibly out of memory" in parts.views.get_trial(trial["id"])["exit_summary"]

    asyncio.run(asyncio.wait_for(body(), 60))
