"""The store's repositories (what the master asks of SQLite, by aggregate) on a real store."""

from __future__ import annotations

import pytest

from master_lite.store import Store


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "master.db")
    yield store
    store.close()


def _experiment(store: Store, state: str = "ACTIVE", **extra) -> int:
    return store.insert("experiments", name="exp", state=state, config={}, start_time=1.0, **extra)


def _trial(store: Store, exp_id: int, request_id: int, state: str = "ACTIVE", **extra) -> int:
    return store.insert(
        "trials",
        experiment_id=exp_id,
        request_id=request_id,
        state=state,
        hparams={},
        seed=1,
        start_time=1.0,
        **extra,
    )


def _report(store: Store, trial_id: int, steps: int, loss: float, group="validation") -> int:
    [metric_id] = store.insert_metrics(
        [
            {
                "trial_id": trial_id,
                "trial_run_id": 1,
                "group": group,
                "steps_completed": steps,
                "metrics": {"loss": loss},
                "report_time": float(steps),
            }
        ]
    )
    return metric_id


def test_experiments_by_filter_and_by_what_recovery_and_gc_need(store):
    active = _experiment(store)
    done = _experiment(store, state="COMPLETED")
    store.update("experiments", done, name="Digits MLP", archived=1)
    assert [e.id for e in store.experiments.matching(name="mlp")] == [done]
    assert [e.id for e in store.experiments.matching(archived=False)] == [active]
    assert [e.id for e in store.experiments.matching(state="COMPLETED")] == [done]
    assert [e.id for e in store.experiments.unfinished()] == [active]
    assert [e.id for e in store.experiments.awaiting_checkpoint_gc()] == [done]
    store.update("experiments", done, checkpoint_gc_done=1)
    assert store.experiments.awaiting_checkpoint_gc() == []


def test_trials_of_an_experiment_by_request_and_membership(store):
    exp_id, other = _experiment(store), _experiment(store)
    ids = [_trial(store, exp_id, request_id) for request_id in range(1, 601)]
    stranger = _trial(store, other, 1)
    assert store.trials.count(exp_id) == 600
    assert [t.id for t in store.trials.of_experiment(exp_id)] == ids
    assert store.trials.by_request(exp_id, 7).id == ids[6]
    assert store.trials.by_request(exp_id, 999) is None
    assert store.trials.experiment_of(stranger) == other
    # More ids than one IN list carries: asked in chunks.
    assert store.trials.ids_in_experiment(exp_id, [*ids, stranger]) == set(ids)


def test_checkpoints_still_needed_are_the_live_trials_and_warm_starts(store):
    exp_id = _experiment(store)
    live = _trial(store, exp_id, 1, latest_checkpoint="live-ckpt")
    _trial(store, exp_id, 2, state="COMPLETED", latest_checkpoint="done-ckpt")
    _experiment(store, warm_start_checkpoint="warm-ckpt")
    _experiment(store, state="CANCELED", warm_start_checkpoint="old-warm")
    assert store.trials.checkpoints_in_use() == {"live-ckpt"}
    assert store.experiments.warm_start_checkpoints_in_use() == {"warm-ckpt"}
    assert live


def test_metrics_validation_lookups_and_the_first_notebook_error_kept(store):
    exp_id = _experiment(store)
    trial_id = _trial(store, exp_id, 1)
    _report(store, trial_id, 10, 0.5)
    again = _report(store, trial_id, 10, 0.4)  # the same step reported again: the latest wins
    _report(store, trial_id, 10, 9.0, group="training")
    assert store.metrics.validation_at(trial_id, 10)["id"] == again
    assert store.metrics.validation_at(trial_id, 20) is None
    assert [r["metrics"]["loss"] for r in store.metrics.validations(trial_id)] == [0.5, 0.4]
    store.update("trials", trial_id, best_validation_id=again)
    assert [r["id"] for r in store.metrics.best_validations(exp_id)] == [again]
    store.trials.set_notebook_error_once(trial_id, {"exception": "first"})
    store.trials.set_notebook_error_once(trial_id, {"exception": "second"})
    assert store.get("trials", trial_id)["notebook_error"] == {"exception": "first"}


def test_log_lines_filtered_with_tail_and_limit(store):
    exp_id = _experiment(store)
    trial_id = _trial(store, exp_id, 1)
    store.insert_logs(
        [
            (trial_id, i % 2, "stdout" if i < 4 else "stderr", float(i), f"line {i}")
            for i in range(6)
        ]
    )

    def lines(**kwargs):
        return [row["line"] for row in store.logs.lines(trial_id, **kwargs)]

    assert lines() == [f"line {i}" for i in range(6)]
    assert lines(tail=2) == ["line 4", "line 5"]
    assert lines(tail=3, limit=1) == ["line 3"]
    assert lines(limit=2) == ["line 0", "line 1"]
    assert lines(rank=1, stream="stdout") == ["line 1", "line 3"]


def test_checkpoints_put_replace_and_match(store):
    exp_id = _experiment(store)
    trial_id = _trial(store, exp_id, 1)
    row = {
        "uuid": "u1",
        "trial_id": trial_id,
        "experiment_id": exp_id,
        "allocation_id": "trial-1.1",
        "steps_completed": 5,
        "metadata": {"steps_completed": 5},
        "resources": {"model.pt": 10},
        "state": "COMPLETED",
        "report_time": 2.0,
        "path": "/ckpt/u1",
    }
    store.checkpoints.put(row)
    store.checkpoints.put({**row, "uuid": "u0", "report_time": 1.0})
    store.checkpoints.put({**row, "resources": {"model.pt": 20}})  # a re-report replaces
    found = store.checkpoints.matching(experiment_id=exp_id, state="COMPLETED")
    assert [c.uuid for c in found] == ["u0", "u1"]
    assert found[1].resources == {"model.pt": 20}
    assert store.checkpoints.matching(trial_id=trial_id, state="DELETED") == []


def test_tokens_of_allocations_are_revoked(store):
    exp_id = _experiment(store)
    trial_id = _trial(store, exp_id, 1)
    for token, allocation in (("h1", "trial-1.1"), ("h2", "trial-1.2")):
        store.insert("trial_tokens", token_hash=token, trial_id=trial_id, allocation_id=allocation)
    assert store.allocations.token_owners() == {"h1": "trial-1.1", "h2": "trial-1.2"}
    store.allocations.revoke_tokens("trial-1.1")
    assert store.allocations.token_owners() == {"h2": "trial-1.2"}
    store.allocations.revoke_all_tokens()
    assert store.allocations.token_owners() == {}
