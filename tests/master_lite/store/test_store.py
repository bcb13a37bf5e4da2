import threading

from master_lite.store import MIGRATIONS, Store


def test_migrations_are_applied_once_and_recorded(tmp_path):
    store = Store(tmp_path / "master.db")
    assert store.schema_version() == len(MIGRATIONS)
    assert store.scalar("SELECT COUNT(*) FROM schema_version") == len(MIGRATIONS)
    store.insert("contexts", hash="abc", path="/x", size=1, created=0.0)
    store.close()

    reopened = Store(tmp_path / "master.db")
    assert reopened.schema_version() == len(MIGRATIONS)
    assert reopened.scalar("SELECT COUNT(*) FROM schema_version") == len(MIGRATIONS)
    assert reopened.get("contexts", "abc", key_column="hash")["size"] == 1
    reopened.close()


def test_wal_mode_and_foreign_keys(tmp_path):
    store = Store(tmp_path / "master.db")
    assert store.pragma("journal_mode") == "wal"
    assert store.pragma("foreign_keys") == 1
    assert store.pragma("busy_timeout") > 0
    store.close()


def _experiment(store):
    return store.insert(
        "experiments", name="e", state="ACTIVE", config={"a": [1, 2]}, labels=["x"], start_time=1.0
    )


def test_json_columns_round_trip_and_update(tmp_path):
    store = Store(tmp_path / "master.db")
    exp_id = _experiment(store)
    row = store.get("experiments", exp_id)
    assert row["config"] == {"a": [1, 2]} and row["labels"] == ["x"] and row["notebook"] is None
    store.update("experiments", exp_id, notebook={"path": "n.ipynb"}, state="PAUSED")
    row = store.get("experiments", exp_id)
    assert row["notebook"] == {"path": "n.ipynb"} and row["state"] == "PAUSED"
    store.close()


def test_batched_metric_insert_returns_contiguous_ids(tmp_path):
    store = Store(tmp_path / "master.db")
    exp_id = _experiment(store)
    trial_id = store.insert(
        "trials",
        experiment_id=exp_id,
        request_id=1,
        state="ACTIVE",
        hparams={},
        seed=1,
        start_time=1.0,
    )
    rows = [
        {
            "trial_id": trial_id,
            "trial_run_id": 1,
            "group": "training",
            "steps_completed": i,
            "metrics": {"loss": 1.0 / (i + 1)},
            "report_time": float(i),
        }
        for i in range(500)
    ]
    ids = store.insert_metrics(rows)
    assert len(ids) == 500 and ids == list(range(ids[0], ids[0] + 500))
    stored = store.metric_rows("trial_id = ? AND group_name = ?", (trial_id, "training"))
    assert [r["id"] for r in stored] == ids
    assert stored[10]["metrics"] == {"loss": 1.0 / 11} and stored[10]["group"] == "training"
    store.close()


def test_foreign_key_rejects_metrics_of_unknown_trial(tmp_path):
    import sqlite3

    import pytest

    store = Store(tmp_path / "master.db")
    with pytest.raises(sqlite3.IntegrityError):
        store.insert_metrics(
            [
                {
                    "trial_id": 99,
                    "trial_run_id": 1,
                    "group": "training",
                    "steps_completed": 0,
                    "metrics": {},
                    "report_time": 0.0,
                }
            ]
        )
    assert store.scalar("SELECT COUNT(*) FROM metrics") == 0
    store.close()


def test_log_batches_from_many_threads(tmp_path):
    store = Store(tmp_path / "master.db")
    all_ids = []
    lock = threading.Lock()

    def writer(rank):
        for batch in range(20):
            ids = store.insert_logs(
                [(1, rank, "stdout", 0.0, f"r{rank} b{batch} l{i}") for i in range(10)]
            )
            with lock:
                all_ids.extend(ids)

    threads = [threading.Thread(target=writer, args=(rank,)) for rank in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(all_ids) == len(set(all_ids)) == 800
    assert store.scalar("SELECT COUNT(*) FROM logs") == 800
    rows = store.select("logs", "id = ?", (all_ids[0],))
    assert rows[0]["line"].startswith("r")
    store.close()


def test_a_closed_store_says_the_master_is_stopping(tmp_path) -> None:
    """Every use of a closed store raises `MasterStopping` (the API's 503), still a
    RuntimeError for code that caught the old error (issue 28 item 1)."""
    import pytest

    from master_lite.errors import MasterStopping

    store = Store(tmp_path / "master.db")
    store.close()
    with pytest.raises(MasterStopping, match="the master is stopping") as raised:
        store.experiments.get(1)
    assert isinstance(raised.value, RuntimeError)
    assert raised.value.status == 503
