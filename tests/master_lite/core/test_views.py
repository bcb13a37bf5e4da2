"""The read side (views), the logs and the contexts parts, each over a real store."""

from __future__ import annotations

import asyncio
import json

import pytest

from master_lite import errors
from master_lite._core import MetricsQuery, Views
from master_lite.reports import TrialLogs
from master_lite.runs import Contexts
from tests._support import tar_gz
from tests._support.parts import open_state


def _experiment(store, *, smaller_is_better: bool = True) -> int:
    config = {"searcher": {"metric": "loss", "smaller_is_better": smaller_is_better}}
    return store.insert("experiments", name="e", state="ACTIVE", config=config, start_time=1.0)


def _trial(store, exp_id: int, request_id: int) -> int:
    return store.insert(
        "trials",
        experiment_id=exp_id,
        request_id=request_id,
        state="ACTIVE",
        hparams={"lr": request_id},
        seed=request_id,
        start_time=1.0,
    )


def _validation(store, trial_id: int, steps: int, loss: float) -> None:
    [metric_id] = store.insert_metrics(
        [
            {
                "trial_id": trial_id,
                "trial_run_id": 1,
                "group": "validation",
                "steps_completed": steps,
                "metrics": {"loss": loss},
                "report_time": float(steps),
            }
        ]
    )
    store.update("trials", trial_id, latest_validation_id=metric_id, best_validation_id=metric_id)


def test_trials_are_paged_best_first_and_show_the_live_allocation(tmp_path):
    async def body() -> None:
        shared = open_state(tmp_path, asyncio.get_running_loop())
        store = shared.store
        views = Views(shared)
        live = {"id": "trial-2.1", "slot_ids": [0]}
        exp_id = _experiment(store)
        trials = [_trial(store, exp_id, request_id) for request_id in (1, 2, 3)]
        _validation(store, trials[0], 10, 0.5)
        _validation(store, trials[1], 10, 0.25)  # the best; trials[2] has no validation
        views.connect(allocation_of=lambda trial_id: live if trial_id == trials[1] else None)

        page = views.trials_page(exp_id, limit=2, order_by="best")
        assert page["total"] == 3
        assert [t["id"] for t in page["trials"]] == [trials[1], trials[0]]
        assert page["trials"][0]["allocation_id"] == "trial-2.1"
        assert page["trials"][0]["searcher_metric"] == 0.25
        assert views.trials_page(exp_id, offset=2, order_by="best")["trials"][0]["id"] == trials[2]
        assert views.best_validation(exp_id) == 0.25
        assert views.get_experiment(exp_id)["num_trials"] == 3

        reports = json.loads(
            views.get_metrics_json(MetricsQuery(experiment_id=exp_id, trial_ids=[trials[1]]))
        )
        assert [r["metrics"] for r in reports] == [{"loss": 0.25}]
        with pytest.raises(errors.InvalidRequest, match="only with experiment_id"):
            views.get_metrics(MetricsQuery(trial_ids=[trials[1]]))
        with pytest.raises(errors.NotFound):
            views.get_trial(999)
        shared.store.close()

    asyncio.run(body())


def test_logs_keep_the_first_notebook_error_of_a_run_and_read_back_by_stream(tmp_path):
    async def body() -> None:
        shared = open_state(tmp_path, asyncio.get_running_loop())
        logs = TrialLogs(shared)
        trial_id = _trial(shared.store, _experiment(shared.store), 1)
        first = {"cell_index": 2, "line": 4, "exception": "ValueError: first"}
        second = {"cell_index": 3, "line": 1, "exception": "KeyError: second"}
        logs.store_logs(
            [
                (trial_id, 0, "stdout", 1.0, "training"),
                (trial_id, 0, "stderr", 2.0, f"DET_NOTEBOOK_ERROR {json.dumps(first)}"),
                (trial_id, 1, "stderr", 3.0, f"DET_NOTEBOOK_ERROR {json.dumps(second)}"),
            ]
        )
        logs.master_log(trial_id, "trial-1.1 exited with code 1")

        assert [r["line"] for r in logs.get_logs(trial_id, stream="master")] == [
            "trial-1.1 exited with code 1"
        ]
        assert [r["line"] for r in logs.get_logs(trial_id, tail=1)] == [
            "trial-1.1 exited with code 1"
        ]
        stored = shared.store.get("trials", trial_id)["notebook_error"]
        assert stored == {"notebook": None, "cell_id": None, **first}
        with pytest.raises(errors.NotFound):
            logs.get_logs(trial_id + 1)
        shared.store.close()

    asyncio.run(body())


def test_a_context_is_checked_stored_once_by_hash_and_unpacked(tmp_path):
    async def body() -> None:
        shared = open_state(tmp_path, asyncio.get_running_loop())
        contexts = Contexts(shared, size_limit=64 * 1024)
        data = tar_gz({"train.py": "print('hi')\n"})
        context_hash = contexts.verify(data)
        contexts.save(context_hash, data)
        contexts.save(context_hash, data)  # the same content: one file, one row
        assert contexts.read(context_hash) == data
        assert [p.name for p in (tmp_path / "contexts").iterdir()] == [f"{context_hash}.tar.gz"]
        contexts.unpack(context_hash, tmp_path / "work")
        assert (tmp_path / "work" / "train.py").read_text() == "print('hi')\n"

        with pytest.raises(errors.TooLarge):
            contexts.verify(b"x" * (64 * 1024 + 1))
        with pytest.raises(errors.NotFound):
            contexts.read("0" * 64)
        shared.store.close()

    asyncio.run(body())


def test_the_list_of_experiments_shows_what_each_experiment_shows(tmp_path):
    # The list reads every experiment in a few queries (no per-experiment queries, no config
    # decoded); each entry is what the experiment's own read shows, for configs SQLite's JSON
    # functions reject (NaN) too, trials or none, bigger or smaller is better, any filter.
    async def body() -> None:
        shared = open_state(tmp_path, asyncio.get_running_loop())
        store = shared.store
        views = Views(shared)
        smaller = _experiment(store)
        bigger = _experiment(store, smaller_is_better=False)
        for exp_id in (smaller, bigger):
            for request_id, loss in ((1, 0.5), (2, 0.25)):
                _validation(store, _trial(store, exp_id, request_id), 10, loss)
        empty = _experiment(store)
        store.update("experiments", empty, labels=["x"], archived=True, state="COMPLETED")
        odd = store.insert(
            "experiments",
            name="odd",
            state="ACTIVE",
            config={
                "searcher": {"name": "single", "metric": "loss"},
                "unmanaged": True,
                "hyperparameters": {"w": float("nan")},
            },
            start_time=2.5,
        )
        _trial(store, odd, 1)
        no_metric = store.insert(
            "experiments", name="none", state="ACTIVE", config={}, start_time=3.0
        )

        listed = views.list_experiments()
        assert [e["id"] for e in listed] == [smaller, bigger, empty, odd, no_metric]
        for entry in listed:
            assert entry == views.get_experiment(entry["id"], with_config=False)
        by_id = {e["id"]: e for e in listed}
        assert by_id[smaller]["best_validation"] == 0.25
        assert by_id[bigger]["best_validation"] == 0.5
        assert (by_id[smaller]["num_trials"], by_id[empty]["num_trials"]) == (2, 0)
        assert by_id[odd]["unmanaged"] is True and by_id[odd]["searcher"]["name"] == "single"
        assert [e["id"] for e in views.list_experiments(archived=True)] == [empty]
        assert [e["id"] for e in views.list_experiments(state="ACTIVE", name="OD")] == [odd]
        shared.store.close()

    asyncio.run(body())
