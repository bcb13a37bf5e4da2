"""Every trial's logs of an experiment in one read, with a search (issue 28 item 10: the
all-trials log view): lines interleaved in the order they were written, each with its trial,
the search a case-insensitive substring over the whole history, never another experiment's."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from master_lite import errors
from tests._support.parts import SINGLE, started_parts

TWO_TRIALS = {
    **SINGLE,
    "hyperparameters": {"lr": {"type": "double", "minval": 0.01, "maxval": 0.1}},
    "searcher": {**cast(dict, SINGLE["searcher"]), "name": "random", "max_trials": 2},
}


def test_all_trials_logs_interleave_and_search_the_whole_history(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, _runner):
            exp = parts.experiments.create_experiment(TWO_TRIALS, None, activate=False)
            first, second = (t["id"] for t in parts.views.list_trials(exp["id"]))
            other = parts.experiments.create_experiment(SINGLE, None, activate=False)
            [stranger] = parts.views.list_trials(other["id"])
            for trial_id, line in (
                (first, "epoch 1 loss 0.5"),
                (second, "epoch 1 loss 0.7"),
                (stranger["id"], "CUDA out of memory (another experiment)"),
                (second, "RuntimeError: CUDA out of memory"),
                (first, "epoch 2 loss 0.4"),
            ):
                parts.logs.master_log(trial_id, line)

            logs = parts.logs.get_experiment_logs(exp["id"])
            assert [(entry["trial_id"], entry["line"]) for entry in logs] == [
                (first, "epoch 1 loss 0.5"),
                (second, "epoch 1 loss 0.7"),
                (second, "RuntimeError: CUDA out of memory"),
                (first, "epoch 2 loss 0.4"),
            ]
            found = parts.logs.get_experiment_logs(exp["id"], search="cuda OUT")
            assert [(e["trial_id"], e["line"]) for e in found] == [
                (second, "RuntimeError: CUDA out of memory")
            ]
            # Text with SQL LIKE wildcards is plain text.
            assert parts.logs.get_experiment_logs(exp["id"], search="%") == []
            tail = parts.logs.get_experiment_logs(exp["id"], tail=2)
            assert [e["line"] for e in tail] == [
                "RuntimeError: CUDA out of memory",
                "epoch 2 loss 0.4",
            ]
            after = parts.logs.get_experiment_logs(exp["id"], after_id=tail[0]["id"])
            assert [e["line"] for e in after] == ["epoch 2 loss 0.4"]
            with pytest.raises(errors.NotFound, match="experiment 999 not found"):
                parts.logs.get_experiment_logs(999)

    asyncio.run(asyncio.wait_for(body(), 60))
