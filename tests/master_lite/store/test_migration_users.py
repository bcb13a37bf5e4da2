"""A store written before migration 8 (users, sessions, owners) opens, upgrades, keeps its
data, and everything in it belongs to the owner account."""

from __future__ import annotations

import asyncio
import getpass
import json
from pathlib import Path

from master_lite._master import Master
from master_lite.store import MIGRATIONS, OWNER_ID, Store
from tests._support.stored import schema_at


def old_store(path: Path, version: int = 7) -> None:
    """A database as a master of schema `version` left it: one experiment, one model."""
    conn = schema_at(path, version)
    config = {
        "name": "old",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    }
    conn.execute(
        "INSERT INTO experiments (name, state, config, start_time, end_time, "
        "searcher_shutdown, notes) VALUES ('old', 'COMPLETED', ?, 1.0, 2.0, 1, 'kept')",
        (json.dumps(config),),
    )
    conn.execute(
        "INSERT INTO models (name, creation_time, last_updated_time) VALUES ('old-model', 1, 1)"
    )
    conn.commit()
    conn.close()


def test_migration_8_keeps_the_data_and_gives_it_to_the_owner_account(tmp_path: Path) -> None:
    db = tmp_path / "master.db"
    old_store(db)
    store = Store(db)
    assert store.schema_version() == len(MIGRATIONS) >= 8
    experiment = store.experiments.get(1)
    assert experiment is not None and experiment.notes == "kept"
    assert experiment.owner_id == OWNER_ID
    model = store.models.by_name("old-model")
    assert model is not None and model.owner_id == OWNER_ID
    [owner] = store.users.all()
    assert owner.id == OWNER_ID and owner.admin and owner.active
    assert owner.password_hash is None  # signs in with the master token only
    store.close()


def test_a_master_on_an_old_store_names_the_owner_after_the_login(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    old_store(root / "master.db")

    async def body() -> tuple[dict, list[dict]]:
        master = Master(root, cpu_slots=1, gpus=[])
        await master.start("http://127.0.0.1:9")
        try:
            return master.views.get_experiment(1), master.views.list_experiments()
        finally:
            await master.stop()

    experiment, listing = asyncio.run(body())
    assert experiment["userId"] == OWNER_ID
    assert experiment["username"] == getpass.getuser()
    assert listing[0]["username"] == getpass.getuser() and listing[0]["userId"] == OWNER_ID
