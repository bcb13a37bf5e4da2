"""Make `store_current.db`: a master store written by the code on PYTHONPATH (kept as a fixture).

Run from the repository root, with the code whose databases must keep opening:

    PYTHONPATH=harness:. python tests/master_lite/store/data/make_store_current.py OUT.db

It drives the real parts (tests/_support/parts.py) over a fresh store: an experiment of two
trials, metrics, a checkpoint, logs with a notebook error, a run that exited and was restarted.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
from pathlib import Path

from tests._support.parts import SINGLE, settle, started_parts

NOTEBOOK_ERROR = (
    'DET_NOTEBOOK_ERROR {"notebook": "/w/q.ipynb", "cell_id": "c1", "cell_index": 3, '
    '"line": 5, "exception": "ValueError: boom"}'
)


async def fill(root: Path) -> None:
    async with started_parts(root) as (parts, runner):
        config = {
            **SINGLE,
            "name": "fixture",
            "labels": ["typed", "rows"],
            "description": "made by the pre-typed-rows store",
            "searcher": {
                "name": "grid",
                "metric": "loss",
                "max_length": {"batches": 10},
                "max_concurrent_trials": 2,
            },
            "hyperparameters": {"lr": {"type": "categorical", "vals": [0.1, 0.01]}},
        }
        exp = parts.experiments.create_experiment(config, None)
        first = parts.views.list_trials(exp["id"])[0]["id"]
        allocation = runner.launched[0].allocation_id
        parts.reports.report_metrics(
            first,
            [
                {"group": "training", "steps_completed": 5, "metrics": {"loss": 0.7}},
                {"group": "validation", "steps_completed": 5, "metrics": {"loss": 0.5}},
                {"group": "training", "steps_completed": 10, "metrics": {"loss": 0.3}},
                {"group": "validation", "steps_completed": 10, "metrics": {"loss": 0.2}},
            ],
        )
        parts.checkpoints.report_checkpoint(
            {
                "uuid": "ckpt-fixture-1",
                "allocation_id": allocation,
                "metadata": {"steps_completed": 10, "framework": "torch"},
                "resources": {"model.pt": 3, "opt.pt": 5},
            }
        )
        parts.reports.report_progress(first, 0.5)
        parts.logs.store_logs(
            [
                (first, 0, "stdout", 1700000000.0, "hello from rank 0"),
                (first, None, "stderr", 1700000001.0, "a warning"),
            ]
        )
        runner.exit(allocation, 1)  # the run fails once: the trial restarts (run 2)
        await settle(lambda: parts.views.get_trial(first)["restarts"] == 1)
        parts.logs.store_logs([(first, 0, "stderr", 1700000002.0, NOTEBOOK_ERROR)])


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        asyncio.run(fill(root))
        source, target = sqlite3.connect(root / "master.db"), sqlite3.connect(out)
        source.backup(target)  # one self-contained file (the WAL folded in)
        target.execute("VACUUM")
        target.close()
        source.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
