"""A store written before migration 10 (the job queue position) opens and upgrades: its
experiments were never moved (NULL position: their id is their place), and a position set
now is kept."""

from __future__ import annotations

from pathlib import Path

from master_lite.runs._scheduling import queue_position
from master_lite.store import MIGRATIONS, Store
from tests.master_lite.store.test_migration_users import old_store


def test_migration_10_leaves_old_experiments_unmoved(tmp_path: Path) -> None:
    db = tmp_path / "master.db"
    old_store(db, version=9)
    store = Store(db)
    assert store.schema_version() == len(MIGRATIONS) >= 10
    experiment = store.experiments.get(1)
    assert experiment is not None and experiment.notes == "kept"
    assert experiment.queue_position is None and queue_position(experiment) == 1.0
    store.experiments.set_queue_position(1, 0.5)
    store.close()
    reopened = Store(db)
    moved = reopened.experiments.get(1)
    assert moved is not None and queue_position(moved) == 0.5
    reopened.close()
