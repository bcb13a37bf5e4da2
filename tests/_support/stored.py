"""Rows written straight into a real store, for tests of the parts that read them (checkpoint GC,
the model registry): a finished experiment with checkpoints whose directories exist; and a
database as an older master left it (`schema_at`), for the migration tests."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from master_lite.store import MIGRATIONS, Store


def schema_at(path: Path, version: int) -> sqlite3.Connection:
    """A new database at `path` with the first `version` migrations applied and recorded, as a
    master of that schema left it; the open connection, to add its rows (commit and close)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied REAL)")
    for number, script in enumerate(MIGRATIONS[:version], start=1):
        conn.executescript(script)
        conn.execute("INSERT INTO schema_version VALUES (?, ?)", (number, time.time()))
    return conn


def finished_experiment(
    store: Store,
    storage_dir: Path,
    losses: dict[int, float | None],
    *,
    keep: dict[str, int],
) -> list[str]:
    """A COMPLETED experiment of one COMPLETED trial with a checkpoint at each step of `losses`.

    Each checkpoint has its directory `storage_dir/<uuid>` holding `weights` (the step), and,
    where its loss is not None, a validation report of it (searcher metric `loss`, smaller is
    better).

    Args:
        store: the store.
        storage_dir: the shared_fs storage directory (created).
        losses: {steps_completed: validation loss or None}.
        keep: the GC policy: save_experiment_best, save_trial_best, save_trial_latest.

    Returns:
        The checkpoints' uuids, in the order of `losses`.
    """
    storage = {
        "type": "shared_fs",
        "host_path": str(storage_dir.parent),
        "storage_path": storage_dir.name,
        **keep,
    }
    config = {
        "searcher": {"metric": "loss", "smaller_is_better": True},
        "checkpoint_storage": storage,
    }
    exp_id = store.insert("experiments", name="e", state="COMPLETED", config=config, start_time=1.0)
    trial_id = store.insert(
        "trials",
        experiment_id=exp_id,
        request_id=1,
        state="COMPLETED",
        hparams={},
        seed=1,
        start_time=1.0,
    )
    uuids = []
    for steps, loss in losses.items():
        uuid = f"00000000-0000-4000-{exp_id:04d}-{steps:012d}"  # a UUID, as the master requires
        (storage_dir / uuid).mkdir(parents=True)
        (storage_dir / uuid / "weights").write_text(str(steps))
        record: dict[str, Any] = {
            "uuid": uuid,
            "trial_id": trial_id,
            "experiment_id": exp_id,
            "allocation_id": None,
            "steps_completed": steps,
            "metadata": {"steps_completed": steps},
            "resources": {"weights": 1},
            "state": "COMPLETED",
            "report_time": float(steps),
            "path": str(storage_dir / uuid),
        }
        store.checkpoints.put(record)
        if loss is not None:
            report = {
                "trial_id": trial_id,
                "trial_run_id": 1,
                "group": "validation",
                "steps_completed": steps,
                "metrics": {"loss": loss},
                "report_time": float(steps),
            }
            store.insert_metrics([report])
        uuids.append(uuid)
    return uuids
