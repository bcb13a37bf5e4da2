"""Typed rows: a store written before them still opens, and its repositories read it back as
frozen dataclasses; writes name columns that are checked.

`data/store_current.db` was made by `data/make_store_current.py` with the code before typed rows
(schema version 4): an experiment of two grid trials, metrics, a checkpoint, logs with a
notebook error, and a run of trial 1 that failed once (so trial 1 is on its second run).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from master_lite.store import (
    MIGRATIONS,
    AllocationRow,
    CheckpointRow,
    ExperimentRow,
    Store,
    TokenRow,
    TrialRow,
)

DATA = Path(__file__).parent / "data" / "store_current.db"


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "master.db"
    shutil.copy(DATA, path)  # the fixture itself is never written
    opened = Store(path)
    yield opened
    opened.close()


def test_a_store_made_before_typed_rows_opens_at_the_current_schema(store):
    assert store.schema_version() == len(MIGRATIONS)
    assert store.migrate() == len(MIGRATIONS)  # opening again applies nothing new


def test_its_rows_read_back_typed(store):
    experiment = store.experiments.get(1)
    assert isinstance(experiment, ExperimentRow)
    assert (experiment.name, experiment.state, experiment.labels) == (
        "fixture",
        "ACTIVE",
        ["typed", "rows"],
    )
    assert experiment.archived is False and experiment.checkpoint_gc_done is False
    assert experiment.config["searcher"]["name"] == "grid"
    assert experiment.searcher_snapshot["name"] == "grid"
    assert experiment.warm_start_checkpoint is None

    first, second = store.trials.of_experiment(1)
    assert isinstance(first, TrialRow)
    assert (first.id, first.request_id, first.restarts, first.run_id) == (1, 1, 1, 2)
    assert first.hparams == {"lr": 0.01} and second.hparams == {"lr": 0.1}
    assert (first.steps_completed, first.progress, first.exit_code) == (10, 0.5, 1)
    assert first.exit_summary == "exited with code 1"
    assert first.latest_checkpoint == "ckpt-fixture-1"
    assert first.op_queue == [10] and first.closed is False and first.stop_requested is False
    assert first.notebook_error is not None and first.notebook_error["cell_index"] == 3
    assert store.trials.by_request(1, 2) == second

    ended = store.allocations.get("trial-1.1")
    assert isinstance(ended, AllocationRow)
    assert (ended.state, ended.exit_code, ended.slot_ids) == ("ENDED", 1, [0])
    assert ended.preempt_requested is False
    assert [a.id for a in store.allocations.unfinished()] == ["trial-1.2", "trial-2.1"]
    assert sorted(store.allocations.token_owners().values()) == ["trial-1.2", "trial-2.1"]
    token_hash = next(iter(store.allocations.token_owners()))
    token = store.allocations.token(token_hash)
    assert isinstance(token, TokenRow) and token.trial_id in (1, 2)

    checkpoint = store.checkpoints.get("ckpt-fixture-1")
    assert isinstance(checkpoint, CheckpointRow)
    assert (checkpoint.trial_id, checkpoint.allocation_id, checkpoint.state) == (
        1,
        "trial-1.1",
        "COMPLETED",
    )
    assert checkpoint.metadata == {"steps_completed": 10, "framework": "torch"}
    assert checkpoint.resources == {"model.pt": 3, "opt.pt": 5}

    # Metrics and logs stay the store's dicts (bulk payloads).
    assert [m["steps_completed"] for m in store.metrics.validations(1)] == [5, 10]
    lines = [row["line"] for row in store.logs.lines(1)]
    assert "hello from rank 0" in lines and "a warning" in lines


def test_rows_are_frozen_snapshots(store):
    trial = store.trials.get(2)
    assert trial is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        trial.state = "PAUSED"  # type: ignore[misc]
    store.trials.set_state(2, "PAUSED")
    assert trial.state == "ACTIVE"  # what was read stays what it was
    assert store.trials.get(2).state == "PAUSED"  # type: ignore[union-attr]


def test_named_writes_and_checked_columns(store):
    store.trials.mark_closed(2)
    store.trials.set_op_queue(2, [10, 20])
    store.trials.set_progress(2, 1.25)  # clamped
    trial = store.trials.get(2)
    assert trial is not None and trial.closed is True
    assert (trial.op_queue, trial.progress) == ([10, 20], 1.0)
    store.experiments.set_archived(1, True)
    assert store.experiments.get(1).archived is True  # type: ignore[union-attr]

    with pytest.raises(ValueError, match="no writable column 'stat'"):
        store.trials._update(2, stat="PAUSED")
    with pytest.raises(ValueError, match="no writable column 'id'"):
        store.trials._update(2, id=7)  # the key is not a column one updates
    with pytest.raises(ValueError, match="no writable column"):
        store.allocations._update("trial-2.1", preempted=True)
    with pytest.raises(ValueError, match="no writable column"):
        store.checkpoints.put({"uuid": "x", "bogus": 1})
    with pytest.raises(ValueError, match="no writable column"):
        store.experiments.create(name="e", state="ACTIVE", config={}, start_time=1.0, colour=1)
    assert store.trials.get(2).state == "ACTIVE"  # type: ignore[union-attr]


def test_unknown_keys_read_as_none(store):
    assert store.trials.get(999) is None
    assert store.experiments.get(999) is None
    assert store.allocations.get("nope") is None
    assert store.checkpoints.get("nope") is None
    assert store.allocations.token("nope") is None
