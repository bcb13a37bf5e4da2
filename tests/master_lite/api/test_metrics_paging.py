"""Paging and downsampling of the metric and trial reads, against a real Master and store.

The store is filled directly (as bench_api_read_latency.py does) so the series have known
shapes: long and short ones, two groups, superseded reports of a resumed run, NaN values.
Reads are checked against the reports and trials built the way the API built them before the
reads moved into SQL (`Store.metric_rows` + `_serialize`), and over HTTP for the parameters.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import sqlite3
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
import tornado.httpclient
import tornado.httpserver
import tornado.netutil
import tornado.web

from determined.common import expconf
from master_lite import errors
from master_lite._core import MetricsQuery, _metric_format, _serialize
from master_lite._master import Master
from master_lite.api import make_handlers
from master_lite.store import MIGRATIONS, Store
from master_lite.store._queries import evenly_spaced_positions, iso_time_sql
from tests._support.stored import schema_at

NOW = 1_763_780_000.123456


def _populate(root: Path) -> dict:
    """Experiment 1 (trials: long, short, resumed, empty) and experiment 2 (one trial)."""
    store = Store(root / "master.db")
    config = expconf.apply_defaults(
        {
            "name": "paging",
            "entrypoint": "true",
            "searcher": {"name": "random", "metric": "loss", "max_trials": 4, "max_length": 1},
            "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}},
        },
        default_checkpoint_storage={"type": "shared_fs", "host_path": str(root / "ck")},
    )
    ids: dict = {"trials": {}}
    for exp_name in ("exp", "other"):
        ids[exp_name] = store.insert(
            "experiments",
            name=exp_name,
            state="COMPLETED",
            config=config,
            progress=1.0,
            start_time=NOW,
            end_time=NOW + 60,
            searcher_shutdown=1,
        )

    def trial(exp: str, name: str, request_id: int, lr: float) -> int:
        trial_id = store.insert(
            "trials",
            experiment_id=ids[exp],
            request_id=request_id,
            state="COMPLETED",
            hparams={"lr": lr},
            seed=request_id,
            run_id=1,
            start_time=NOW + request_id,
            end_time=NOW + 30.5,
            closed=1,
        )
        ids["trials"][name] = trial_id
        return trial_id

    def report(trial_id: int, run: int, group: str, step: int, metrics: dict) -> int:
        return store.insert_metrics(
            [
                {
                    "trial_id": trial_id,
                    "trial_run_id": run,
                    "group": group,
                    "steps_completed": step,
                    "metrics": metrics,
                    "report_time": NOW + step / 7,
                }
            ]
        )[0]

    long_ = trial("exp", "long", 1, 0.01)
    short = trial("exp", "short", 2, 0.02)
    resumed = trial("exp", "resumed", 3, 0.03)
    trial("exp", "empty", 4, 0.04)
    other = trial("other", "other", 1, 0.05)
    for step in range(1, 101):  # interleaved, so ids of one series are not contiguous
        report(long_, 1, "training", step, {"loss": 1 / step, "acc": step / 100})
        if step % 10 == 0:
            report(long_, 1, "validation", step, {"loss": 2 / step})
        if step <= 3:
            report(short, 1, "training", step, {"loss": 5 - step})
        report(other, 1, "training", step, {"loss": 1.0})
    report(short, 1, "validation", 3, {"loss": float("nan")})
    for step in range(1, 21):
        report(resumed, 1, "training", step, {"loss": 1.0 + step})
    for step in range(11, 21):  # run 2 redid steps 11..20 after resuming from step 10
        report(resumed, 2, "training", step, {"loss": 2.0 + step})
    store.execute(
        "UPDATE metrics SET superseded_by_run = 2 WHERE trial_id = ? AND "
        "trial_run_id = 1 AND steps_completed > 10",
        (resumed,),
    )
    report(resumed, 2, "validation", 20, {"loss": 0.5})
    for name, trial_id in ids["trials"].items():
        latest = {
            group: store.scalar(
                "SELECT MAX(id) FROM metrics WHERE trial_id = ? AND group_name = ? AND "
                "superseded_by_run IS NULL",
                (trial_id, group),
            )
            for group in ("training", "validation")
        }
        best = None
        for row in store.metric_rows("trial_id = ? AND group_name = 'validation'", (trial_id,)):
            # As the write path does: a NaN validation is never the best.
            value = _metric_format.comparable_metric_value(row["metrics"], "loss")
            if value is not None and (best is None or value < best[1]):
                best = (row["id"], value)
        store.update(
            "trials",
            trial_id,
            latest_training_id=latest["training"],
            latest_validation_id=latest["validation"],
            best_validation_id=best[0] if best else None,
            steps_completed=100 if name == "long" else 20,
        )
    store.close()
    return ids


class Api:
    def __init__(self, master: Master, port: int) -> None:
        self.master = master
        self.port = port
        self.http = tornado.httpclient.AsyncHTTPClient()

    async def get(self, path: str, **query) -> tuple[int, dict]:
        url = f"http://127.0.0.1:{self.port}/api/v1{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        response = await self.http.fetch(
            url, raise_error=False, headers={"Authorization": f"Bearer {self.master.user_token}"}
        )
        return response.code, json.loads(response.body)


def with_api(test: Callable) -> Callable:
    """Run an async test against a started Master (on the populated store) served over HTTP."""

    def wrapper(tmp_path: Path) -> None:
        root = tmp_path / "root"
        root.mkdir()
        ids = _populate(root)

        async def body() -> None:
            master = Master(
                root, cpu_slots=1, gpus=[], preemption_grace_seconds=1, terminate_grace_seconds=1
            )
            await master.start("http://127.0.0.1:9")
            server = tornado.httpserver.HTTPServer(
                tornado.web.Application(make_handlers(master, ""))
            )
            [sock] = tornado.netutil.bind_sockets(0, "127.0.0.1")
            server.add_sockets([sock])
            try:
                await test(Api(master, sock.getsockname()[1]), ids)
            finally:
                server.stop()
                await master.stop(pause_running=False)

        asyncio.run(asyncio.wait_for(body(), 60))

    wrapper.__name__ = test.__name__
    return wrapper


def _reference_metrics(master: Master, where: str, params: tuple) -> list[dict]:
    """What GET .../metrics answered before reads moved into SQL."""
    return [_serialize.metric_json(row) for row in master.store.metric_rows(where, params)]


def _series(reports: list[dict]) -> dict[tuple[int, str], list[dict]]:
    out: dict[tuple[int, str], list[dict]] = {}
    for report in reports:
        out.setdefault((report["trial_id"], report["group"]), []).append(report)
    return out


def _same(a, b) -> bool:
    """Equality that holds NaN equal to NaN (json.loads gives a new NaN each time) and to the
    "NaN" the API answers for it (strict JSON)."""
    return json.dumps(_serialize.finite_json(a), sort_keys=True) == json.dumps(
        _serialize.finite_json(b), sort_keys=True
    )


# --- pure pieces ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, m", [(0, 5), (1, 2), (5, 5), (6, 5), (100, 2), (100, 7), (1000, 200), (999, 998)]
)
def test_evenly_spaced_positions_keep_first_last_and_at_most_m(n: int, m: int) -> None:
    positions = list(evenly_spaced_positions(n, m))
    assert len(positions) == min(n, m)
    assert positions == sorted(set(positions))
    if n:
        assert positions[0] == 0 and positions[-1] == n - 1
    if n > m:
        gaps = {b - a for a, b in zip(positions, positions[1:], strict=False)}
        assert max(gaps) - min(gaps) <= 1, gaps  # evenly spaced


def test_fewer_than_two_datapoints_is_refused() -> None:
    with pytest.raises(ValueError, match="max_datapoints"):
        evenly_spaced_positions(10, 1)


def test_iso_time_in_sql_matches_python() -> None:
    rng = random.Random(7)
    times = [
        NOW,
        0.0,
        1.0078125,
        1_763_780_000.9999996,
        1_763_780_000.0005,
        1_763_780_000.9995,
        1_700_000_000 + 1 / 128,
        1_763_780_000.999999,
    ]
    times += [rng.uniform(1.6e9, 1.9e9) for _ in range(3000)]
    times += [
        rng.randrange(1_600_000_000, 1_900_000_000) + rng.randrange(1000) / 1000
        for _ in range(1000)
    ]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x REAL)")
    conn.executemany("INSERT INTO t VALUES (?)", [(x,) for x in times] + [(None,)])
    got = [
        json.loads(row[0])
        for row in conn.execute(f"SELECT {iso_time_sql('x')} FROM t ORDER BY rowid")
    ]
    assert got == [_serialize.iso(x) for x in times] + [None]


def test_migration_3_replaces_the_trial_group_index(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = schema_at(db, 2)
    conn.commit()
    conn.close()
    store = Store(db)
    indexes = {
        row["name"]
        for row in store._connection().execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'metrics'"
        )
    }
    assert store.schema_version() == len(MIGRATIONS) >= 3
    assert "metrics_current_by_trial_group" in indexes
    assert "metrics_by_trial_group" not in indexes
    plan = " ".join(
        row[-1]
        for row in store._connection().execute(
            "EXPLAIN QUERY PLAN SELECT trial_id, group_name, id FROM metrics WHERE trial_id = 1 "
            "AND group_name = 'validation' AND superseded_by_run IS NULL "
            "ORDER BY trial_id, group_name, id"
        )
    )
    assert "COVERING INDEX metrics_current_by_trial_group" in plan
    store.close()


# --- the facade: same answers as before for the old parameters --------------------------------


@with_api
async def test_unbounded_reads_equal_the_previous_answers(api: Api, ids: dict) -> None:
    master, trials = api.master, ids["trials"]
    experiment_trials = "trial_id IN (SELECT id FROM trials WHERE experiment_id = ?)"
    cases = [
        ({"trial_id": trials["long"]}, "trial_id = ?", (trials["long"],)),
        (
            {"trial_id": trials["resumed"], "group": "training"},
            "trial_id = ? AND group_name = 'training'",
            (trials["resumed"],),
        ),
        (
            {"trial_id": trials["short"], "after_id": 5},
            "trial_id = ? AND id > 5",
            (trials["short"],),
        ),
        (
            {"experiment_id": ids["exp"], "group": "validation"},
            f"{experiment_trials} AND group_name = 'validation'",
            (ids["exp"],),
        ),
        ({"experiment_id": ids["exp"]}, experiment_trials, (ids["exp"],)),
    ]
    for kwargs, where, params in cases:
        expected = _reference_metrics(master, where, params)
        assert expected, kwargs
        assert _same(master.views.get_metrics(MetricsQuery(**kwargs)), expected), kwargs
    limited = master.views.get_metrics(MetricsQuery(experiment_id=ids["exp"], limit=7))
    assert _same(limited, _reference_metrics(master, experiment_trials, (ids["exp"],))[:7])
    nan = master.views.get_metrics(MetricsQuery(trial_id=trials["short"], group="validation"))
    assert math.isnan(nan[0]["metrics"]["loss"])
    status, answer = await api.get(f"/trials/{trials['long']}/metrics")
    assert status == 200
    assert _same(answer["metrics"], _reference_metrics(master, "trial_id = ?", (trials["long"],)))


@with_api
async def test_trials_equal_the_previous_answers(api: Api, ids: dict) -> None:
    master = api.master
    expected = []
    for row in master.store.select("trials", "experiment_id = ?", (ids["exp"],)):

        def metric(metric_id):
            return master.store.metric_rows("id = ?", (metric_id,))[0] if metric_id else None

        latest_validation = metric(row["latest_validation_id"])
        expected.append(
            _serialize.trial_json(
                row,
                allocation=None,
                latest_training=metric(row["latest_training_id"]),
                latest_validation=latest_validation,
                best_validation=metric(row["best_validation_id"]),
                searcher_metric=_metric_format.metric_value(
                    latest_validation["metrics"] if latest_validation else None, "loss"
                ),
            )
        )
    assert _same(master.views.list_trials(ids["exp"]), expected)
    assert _same(master.views.get_trial(ids["trials"]["long"]), expected[0])
    status, answer = await api.get(f"/experiments/{ids['exp']}/trials")
    assert status == 200
    assert answer["total"] == 4
    assert _same(answer["trials"], expected)
    status, answer = await api.get(f"/experiments/{ids['exp']}")
    assert status == 200 and _same(answer["trials"], expected)


# --- downsampling -----------------------------------------------------------------------------


@with_api
async def test_max_datapoints_keeps_first_last_and_evenly_spaced(api: Api, ids: dict) -> None:
    # As the API answers them: NaN as "NaN" (strict JSON).
    full = _series(
        _serialize.finite_json(api.master.views.get_metrics(MetricsQuery(experiment_id=ids["exp"])))
    )
    status, answer = await api.get(f"/experiments/{ids['exp']}/metrics", max_datapoints=4)
    assert status == 200
    sampled = _series(answer["metrics"])
    assert sampled.keys() == full.keys()
    for key, series in full.items():
        kept = sampled[key]
        assert len(kept) == min(4, len(series)), key
        assert kept[0] == series[0] and kept[-1] == series[-1], key
        assert [series[i] for i in evenly_spaced_positions(len(series), 4)] == kept, key
    ids_in_order = [report["id"] for report in answer["metrics"]]
    assert ids_in_order == sorted(ids_in_order)
    # The resumed trial's superseded reports are not part of its series.
    resumed = sampled[(ids["trials"]["resumed"], "training")]
    assert [r["steps_completed"] for r in resumed] == [1, 7, 13, 20]  # positions 0, 6, 12, 19
    assert all(r["trial_run_id"] == 2 for r in resumed if r["steps_completed"] > 10)


@with_api
async def test_one_trial_downsampled(api: Api, ids: dict) -> None:
    trial_id = ids["trials"]["long"]
    status, answer = await api.get(
        f"/trials/{trial_id}/metrics", group="training", max_datapoints=10
    )
    assert status == 200
    steps = [r["steps_completed"] for r in answer["metrics"]]
    assert steps == [1, 12, 23, 34, 45, 56, 67, 78, 89, 100]
    status, answer = await api.get(f"/trials/{trial_id}/metrics", max_datapoints=2)
    groups = _series(answer["metrics"])
    assert [r["steps_completed"] for r in groups[(trial_id, "training")]] == [1, 100]
    assert [r["steps_completed"] for r in groups[(trial_id, "validation")]] == [10, 100]
    # A series shorter than max_datapoints comes whole.
    status, answer = await api.get(
        f"/trials/{trial_id}/metrics", group="validation", max_datapoints=500
    )
    assert len(answer["metrics"]) == 10


@with_api
async def test_filters_combine_with_downsampling(api: Api, ids: dict) -> None:
    trials, exp = ids["trials"], ids["exp"]
    path = f"/experiments/{exp}/metrics"
    status, answer = await api.get(
        path, trial_ids=f"{trials['short']},{trials['long']}", group="training", max_datapoints=3
    )
    assert status == 200
    series = _series(answer["metrics"])
    assert set(series) == {(trials["short"], "training"), (trials["long"], "training")}
    assert [r["steps_completed"] for r in series[(trials["long"], "training")]] == [1, 50, 100]
    # trial_ids alone: every report of those trials; repeats are harmless.
    status, answer = await api.get(path, trial_ids=f"{trials['short']},{trials['short']}")
    assert _same(
        answer["metrics"], api.master.views.get_metrics(MetricsQuery(trial_id=trials["short"]))
    )
    # after_id first (only newer reports are sampled), limit last.
    everything = api.master.views.get_metrics(
        MetricsQuery(trial_id=trials["long"], group="training")
    )
    after = everything[49]["id"]
    status, answer = await api.get(
        path, trial_ids=str(trials["long"]), group="training", after_id=after, max_datapoints=3
    )
    assert [r["steps_completed"] for r in answer["metrics"]] == [51, 75, 100]
    status, answer = await api.get(path, group="training", max_datapoints=3, limit=2)
    assert len(answer["metrics"]) == 2
    assert answer["metrics"][0]["steps_completed"] == 1


@pytest.mark.parametrize(
    "path, query, parameter",
    [
        ("/experiments/{exp}/metrics", {"max_datapoints": 1}, "max_datapoints"),
        ("/experiments/{exp}/metrics", {"max_datapoints": "many"}, "max_datapoints"),
        ("/trials/{long}/metrics", {"max_datapoints": 0}, "max_datapoints"),
        ("/experiments/{exp}/metrics", {"trial_ids": "1,x"}, "trial_ids"),
        ("/experiments/{exp}/metrics", {"trial_ids": "-3"}, "trial_ids"),
        ("/experiments/{exp}/metrics", {"trial_ids": "\u00b2"}, "trial_ids"),
        ("/experiments/{exp}/metrics", {"trial_ids": ","}, "trial_ids"),
        ("/experiments/{exp}/metrics", {"trial_ids": "{other}"}, "trial_ids"),
        ("/experiments/{exp}/metrics", {"trial_ids": ",".join(["1"] * 1001)}, "trial_ids"),
        ("/experiments/{exp}/trials", {"order_by": "loss"}, "order_by"),
        ("/experiments/{exp}/trials", {"offset": -1}, "offset"),
        ("/experiments/{exp}/trials", {"limit": 0}, "limit"),
    ],
)
def test_bad_parameters_are_400_naming_them(
    tmp_path: Path, path: str, query: dict, parameter: str
) -> None:
    @with_api
    async def check(api: Api, ids: dict) -> None:
        names = {"exp": ids["exp"], "long": ids["trials"]["long"], "other": ids["trials"]["other"]}
        status, answer = await api.get(
            path.format(**names), **{k: str(v).format(**names) for k, v in query.items()}
        )
        assert status == 400, answer
        assert parameter in answer["message"], answer

    check(tmp_path)


# --- trial paging -----------------------------------------------------------------------------


@with_api
async def test_trials_paging_and_order(api: Api, ids: dict) -> None:
    trials, exp = ids["trials"], ids["exp"]
    path = f"/experiments/{exp}/trials"
    status, answer = await api.get(path, limit=2)
    assert status == 200
    assert [t["id"] for t in answer["trials"]] == [trials["long"], trials["short"]]
    assert answer["total"] == 4
    status, answer = await api.get(path, limit=2, offset=2)
    assert [t["id"] for t in answer["trials"]] == [trials["resumed"], trials["empty"]]
    status, answer = await api.get(path, offset=3)
    assert [t["id"] for t in answer["trials"]] == [trials["empty"]]
    status, answer = await api.get(path, order_by="-id", limit=1)
    assert [t["id"] for t in answer["trials"]] == [trials["empty"]]
    status, answer = await api.get(path, offset=10)
    assert answer == {"trials": [], "total": 4}
    # best first (loss: smaller is better): resumed 0.5, long 0.2 -> long, resumed; the short
    # trial's only validation is NaN (never a best) and the empty one has none: last, by id.
    status, answer = await api.get(path, order_by="best")
    assert [t["id"] for t in answer["trials"]] == [
        trials["long"],
        trials["resumed"],
        trials["short"],
        trials["empty"],
    ]
    status, answer = await api.get(path, order_by="best", limit=1, offset=1)
    assert [t["id"] for t in answer["trials"]] == [trials["resumed"]]
    assert answer["trials"][0]["best_validation"]["metrics"] == {"loss": 0.5}


@with_api
async def test_unknown_experiment_or_trial_is_404(api: Api, ids: dict) -> None:
    for path, query in [
        ("/experiments/999/trials", {"limit": 1}),
        ("/experiments/999/metrics", {"max_datapoints": 5}),
        ("/trials/999/metrics", {"max_datapoints": 5}),
    ]:
        status, answer = await api.get(path, **query)
        assert status == 404, (path, answer)
    with pytest.raises(errors.InvalidRequest, match="trial_ids: only with experiment_id"):
        api.master.views.get_metrics(MetricsQuery(trial_id=ids["trials"]["long"], trial_ids=[1]))


# --- the widget asks for downsampled curves ---------------------------------------------------


@with_api
async def test_widget_loads_downsampled_validation_curves(api: Api, ids: dict) -> None:
    from jupyter_determined.kernel._widget import ExperimentWidget, curve_points_per_trial

    class Session:  # the facade answers what the HTTP API would
        def __init__(self) -> None:
            self.asked: list[tuple[str, dict]] = []

        def get(self, path: str, params: dict | None = None) -> dict:
            self.asked.append((path, dict(params or {})))
            if path.endswith("/metrics"):
                return {
                    "metrics": api.master.views.get_metrics(
                        MetricsQuery(
                            experiment_id=ids["exp"],
                            group=params["group"],
                            max_datapoints=params["max_datapoints"],
                        )
                    )
                }
            if path.endswith("/logs"):
                return {"logs": []}
            return {
                "experiment": api.master.views.get_experiment(ids["exp"]),
                "trials": api.master.views.list_trials(ids["exp"]),
            }

    session = Session()
    widget = ExperimentWidget(ids["exp"], session=session)
    widget.load()
    asked = [params for path, params in session.asked if path.endswith("/metrics")]
    assert asked == [
        {"group": group, "max_datapoints": curve_points_per_trial(4)}
        for group in ("validation", "training")
    ]
    assert len(widget.curves()[str(ids["trials"]["long"])]) == 10  # 10 validations < 200
    assert curve_points_per_trial(1000) == 5 and curve_points_per_trial(1) == 200
