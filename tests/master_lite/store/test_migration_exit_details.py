"""A store written before migration 4 (trials.exit_summary, trials.notebook_error) opens,
upgrades, and its trials read with both fields null."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from master_lite._master import Master
from master_lite.store import MIGRATIONS, Store
from tests._support.stored import schema_at


def old_store(path: Path, version: int = 3) -> None:
    """A database as a master of schema `version` left it: one experiment, one ended trial."""
    conn = schema_at(path, version)
    config = {
        "name": "old",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    }
    conn.execute(
        "INSERT INTO experiments (name, state, config, start_time, end_time, "
        "searcher_shutdown) VALUES ('old', 'ERROR', ?, 1.0, 2.0, 1)",
        (json.dumps(config),),
    )
    conn.execute(
        "INSERT INTO trials (experiment_id, request_id, state, hparams, seed, "
        "start_time, end_time, exit_code) VALUES (1, 1, 'ERROR', '{}', 7, 1.0, 2.0, 137)"
    )
    conn.commit()
    conn.close()


def test_migration_4_adds_the_columns_to_an_existing_store(tmp_path: Path) -> None:
    db = tmp_path / "master.db"
    old_store(db)
    store = Store(db)
    assert store.schema_version() == len(MIGRATIONS) >= 4
    columns = {row[1] for row in store._connection().execute("PRAGMA table_info(trials)")}
    assert {"exit_summary", "notebook_error"} <= columns
    trial = store.get("trials", 1)
    assert trial["exit_code"] == 137
    assert trial["exit_summary"] is None and trial["notebook_error"] is None
    store.update("trials", 1, notebook_error={"cell_index": 0, "line": 1, "exception": "E"})
    assert store.get("trials", 1)["notebook_error"]["exception"] == "E"  # a JSON column
    store.close()


def test_a_master_on_an_old_store_serves_the_new_fields_as_null(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    old_store(root / "master.db")

    async def body() -> dict:
        master = Master(root, cpu_slots=1, gpus=[])
        await master.start("http://127.0.0.1:9")
        try:
            return master.views.get_trial(1)
        finally:
            await master.stop()

    trial = asyncio.run(body())
    assert trial["state"] == "ERROR" and trial["exit_code"] == 137
    assert trial["exit_summary"] is None and trial["notebook_error"] is None
    assert trial["run_state"] is None
