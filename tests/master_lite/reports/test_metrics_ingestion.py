"""The metrics write path under load: repeat detection that stays an index lookup however long
the series, and the fast parse of the harness's report times (soak/soak_load.py)."""

import random
import time

import pytest

from master_lite._core._metric_format import _report_time, normalize_metric_reports
from master_lite._core._serialize import parse_time
from master_lite.store import Store
from tests.master_lite.api.test_http import TRIAL_1, client, fake  # noqa: F401 - the HTTP fixtures


def _trial(store):
    exp_id = store.insert(
        "experiments", name="e", state="ACTIVE", config={}, labels=[], start_time=1.0
    )
    return store.insert(
        "trials",
        experiment_id=exp_id,
        request_id=1,
        state="ACTIVE",
        hparams={},
        seed=1,
        start_time=1.0,
    )


def _row(trial_id, group, step, run=1, loss=0.5):
    return {
        "trial_id": trial_id,
        "trial_run_id": run,
        "group": group,
        "steps_completed": step,
        "metrics": {"loss": loss},
        "report_time": float(step),
    }


def test_repeats_and_resumed_reports_are_matched_per_group_and_step(tmp_path):
    store = Store(tmp_path / "master.db")
    trial_id = _trial(store)
    first, _ = store.insert_current_metrics(
        trial_id, [_row(trial_id, "training", 5), _row(trial_id, "validation", 5)]
    )
    assert None not in first

    # A retried POST (same run, same metrics) stores nothing again, in either group.
    repeat, superseded = store.insert_current_metrics(
        trial_id, [_row(trial_id, "training", 5), _row(trial_id, "validation", 5)]
    )
    assert repeat == [None, None] and superseded == []

    # A resumed run reporting training step 5 again replaces the first run's training report
    # only; the validation report of the same step is another series and stays current.
    resumed, superseded = store.insert_current_metrics(
        trial_id, [_row(trial_id, "training", 5, run=2, loss=0.25)]
    )
    assert resumed[0] is not None and superseded == [first[0]]
    current = store.metric_rows("trial_id = ?", (trial_id,))
    assert sorted((r["group"], r["trial_run_id"], r["metrics"]["loss"]) for r in current) == [
        ("training", 2, 0.25),
        ("validation", 1, 0.5),
    ]
    store.close()


def test_a_retried_report_of_a_diverged_loss_is_stored_once(tmp_path):
    # Issue 26 row 12: the harness re-POSTs a batch whose answer was lost (the master died
    # after committing it); NaN != NaN must not make the repeat a new report.
    store = Store(tmp_path / "master.db")
    trial_id = _trial(store)
    nan_row = _row(trial_id, "training", 7, loss=float("nan"))
    first, _ = store.insert_current_metrics(trial_id, [nan_row])
    repeat, superseded = store.insert_current_metrics(
        trial_id, [_row(trial_id, "training", 7, loss=float("nan"))]
    )
    assert first[0] is not None and repeat == [None] and superseded == []
    assert len(store.metric_rows("trial_id = ?", (trial_id,))) == 1
    store.close()


def test_repeat_lookup_probes_the_steps_index_instead_of_scanning_the_series(tmp_path):
    store = Store(tmp_path / "master.db")
    trial_id = _trial(store)
    store.insert_metrics([_row(trial_id, "training", step) for step in range(2000)])
    statements: list[str] = []
    store._connection().set_trace_callback(statements.append)
    store.insert_current_metrics(
        trial_id, [_row(trial_id, "training", 2000 + i) for i in range(10)]
    )
    store._connection().set_trace_callback(None)
    lookups = [sql for sql in statements if sql.startswith("SELECT id, group_name")]
    assert len(lookups) == 1
    plan = " ".join(
        row[3] for row in store._connection().execute("EXPLAIN QUERY PLAN " + lookups[0])
    )
    assert "metrics_by_trial_group_steps" in plan and "steps_completed=?" in plan, plan
    store.close()


def test_harness_report_times_parse_exactly_as_the_general_parser():
    rng = random.Random(7)
    samples = []
    for _ in range(2000):
        second = rng.randrange(0, 4_000_000_000)
        samples.append(
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)) + f".{rng.randrange(1000):03d}Z"
        )
    samples += [
        "2026-11-22T01:02:03.000Z",
        "2026-11-22T01:02:03.999Z",
        "2026-11-22T01:02:03.4567Z",
        "2026-11-22T01:02:03Z",
        "2026-11-22T01:02:03.456+00:00",
        1795309323.5,
        None,
    ]
    for value in samples:
        assert _report_time(value) == parse_time(value), value


@pytest.mark.parametrize(
    "value",
    [
        "2026-13-22T01:02:03.456Z",
        "2026-11-22T01:02:03.4a6Z",
        "2026-11-22T01:02:03.\u0664\u0665\u0666Z",
    ],
)
def test_malformed_report_times_are_still_rejected_with_the_report_named(value):
    from master_lite import errors

    with pytest.raises(errors.InvalidRequest) as caught:
        normalize_metric_reports(
            [{"group": "training", "steps_completed": 1, "metrics": {}, "report_time": value}],
            trial_id=3,
            default_run_id=1,
        )
    assert "reports[0].report_time" in caught.value.errors[0]


def test_metrics_answer_says_how_long_the_master_spent_on_the_report(client, fake):  # noqa: F811
    answer = client.post(
        "/api/v1/trials/1/metrics",
        {"reports": [{"group": "training", "steps_completed": 1, "metrics": {"loss": 1.0}}]},
        token=TRIAL_1,
    )
    assert answer.status == 200 and answer.json == {"accepted": 1}
    name, _, duration = answer.headers["Server-Timing"].partition(";dur=")
    assert name == "master" and float(duration) >= 0.0


def test_standalone_master_freezes_startup_objects_out_of_the_collector():
    import subprocess
    import sys

    # In a process of its own: freezing is for the master's process, not pytest's.
    script = (
        "import gc, weakref\n"
        "from master_lite._app import GC_THRESHOLDS, quiet_garbage_collector\n"
        "class Node: pass\n"
        "node = Node(); node.self = node; ref = weakref.ref(node); del node\n"
        "quiet_garbage_collector()\n"
        "assert ref() is None  # garbage cycles are collected, not frozen for good\n"
        "assert gc.get_freeze_count() > 1000, gc.get_freeze_count()\n"
        "assert gc.get_threshold() == GC_THRESHOLDS\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "ok", done.stderr
