"""API read latency under write load: an experiment of 1,000 trials x 1,000 points.

Workload: a finished experiment of 1,000 trials, each with 1,000 metric reports (900 training,
100 validation; one scalar `loss` each), written into a fresh store with master-lite's own
`Store` before the master starts (running 1,000 real trials would take an hour and measure the
scheduler, not reads). While 16 writer processes each POST one report to their own trial every
10 ms (real trials of another experiment; user token), we time, REQUESTS times each, what the
JupyterLab sidebar and the notebook widget request for such an experiment:
  * sidebar: `GET /experiments/{id}` — the experiment with every trial and its latest/best
    metrics (the view's table and hyperparameter plot);
  * sidebar: `GET /experiments/{id}/metrics?trial_ids=<the 8 plotted>&max_datapoints=1000` —
    the learning curves of the plotted trials, every group;
  * widget: `GET /experiments/{id}/metrics?group=validation&max_datapoints=10` — every
    trial's validation curve, 10 points each (`jupyter_determined.kernel._widget.curve_points_per_trial(1000)`);
  * bounded reads for other clients: a page of 50 trials best first
    (`/experiments/{id}/trials?limit=50&order_by=best`) and one trial downsampled
    (`/trials/{id}/metrics?max_datapoints=200`);
  * for reference, the unbounded reads: every trial (`/experiments/{id}/trials`), one trial's
    1,000 reports (`/trials/{id}/metrics`), every validation (100,000 reports).
Floor (same run, same load, interleaved): SQLite reading the rows the answer holds, through
Python's sqlite3 on the same file, JSON decoded — what any server on this store must pay (for
downsampled reads, only the rows kept: finding them is not counted).

Targets (what a person clicking in the sidebar accepts while 16 trials report): p95 <= 300 ms
for every request the sidebar and the widget make, p95 <= 100 ms for a page of trials and one
trial downsampled. The unbounded reads are reported, not targeted: they are what the bounded
ones replace.
Run: PYTHONPATH=harness:. python bench/bench_api_read_latency.py
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    median,
    percentile,
    record,
    running_master,
    sleeping_trials,
    verdict,
    wait_for_experiment,
)

TRIALS = int(os.environ.get("BENCH_READ_TRIALS", "1000"))
POINTS = int(os.environ.get("BENCH_READ_POINTS", "1000"))
REQUESTS = int(os.environ.get("BENCH_READ_REQUESTS", "30"))
WRITERS = 16


def populate(root: pathlib.Path) -> int:
    """A COMPLETED experiment of TRIALS trials x POINTS reports, through master-lite's Store."""
    from determined.common import expconf
    from master_lite.store import Store

    store = Store(root / "master.db")
    config = expconf.apply_defaults(
        {
            "name": "bench-read",
            "entrypoint": "true",
            "searcher": {"name": "random", "metric": "loss", "max_trials": TRIALS, "max_length": 1},
            "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}},
        },
        default_checkpoint_storage={"type": "shared_fs", "host_path": str(root / "checkpoints")},
    )
    now = time.time() - 3600
    exp_id = store.experiments.create(
        name="bench-read",
        state="COMPLETED",
        config=config,
        progress=1.0,
        start_time=now,
        end_time=now + 1800,
        searcher_shutdown=True,
    )
    validation_every = POINTS // 100 or 1
    with store.transaction() as conn:
        for index in range(TRIALS):
            trial_id = conn.execute(
                "INSERT INTO trials (experiment_id, request_id, state, hparams, seed, run_id, "
                "steps_completed, progress, start_time, end_time, closed) "
                "VALUES (?, ?, 'COMPLETED', ?, ?, 1, ?, 1.0, ?, ?, 1)",
                (
                    exp_id,
                    index + 1,
                    json.dumps({"lr": 0.001 + index * 1e-4}),
                    index,
                    POINTS,
                    now,
                    now + 60,
                ),
            ).lastrowid
            rows = [
                (
                    trial_id,
                    1,
                    "validation" if step % validation_every == 0 else "training",
                    step,
                    json.dumps({"loss": 1.0 / step + index * 1e-6}),
                    None,
                    now + step,
                )
                for step in range(1, POINTS + 1)
            ]
            conn.executemany(
                "INSERT INTO metrics (trial_id, trial_run_id, group_name, steps_completed, "
                "metrics, batch_metrics, report_time) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            latest = {
                group: conn.execute(
                    "SELECT MAX(id) FROM metrics WHERE trial_id = ? AND group_name = ?",
                    (trial_id, group),
                ).fetchone()[0]
                for group in ("training", "validation")
            }
            best = conn.execute(
                "SELECT id FROM metrics WHERE trial_id = ? AND group_name = 'validation' "
                "ORDER BY json_extract(metrics, '$.loss') LIMIT 1",
                (trial_id,),
            ).fetchone()[0]
            conn.execute(
                "UPDATE trials SET latest_training_id = ?, latest_validation_id = ?, "
                "best_validation_id = ? WHERE id = ?",
                (latest["training"], latest["validation"], best, trial_id),
            )
    store.close()
    return exp_id


def _writer(
    url: str, token: str, trial_id: int, stop: multiprocessing.Event, counts: multiprocessing.Queue
) -> None:
    from determined.common.api import Session

    session = Session(url, token)
    step = 0
    next_time = time.monotonic()
    while not stop.is_set():
        step += 1
        session.post(
            f"/trials/{trial_id}/metrics",
            {
                "reports": [
                    {"group": "training", "steps_completed": step, "metrics": {"loss": 1.0 / step}}
                ]
            },
        )
        next_time += 0.01
        time.sleep(max(0.0, next_time - time.monotonic()))
    counts.put(step)
    session.close()


# (view, path, query, target p95 in seconds or None, client)
def _views(exp_id: int, trials: list[int]) -> list[tuple[str, str, dict, float | None, str]]:
    plotted = ",".join(map(str, trials[:8]))
    one = trials[0]
    return [
        ("experiment with its trials", f"/experiments/{exp_id}", {}, 0.300, "sidebar"),
        (
            "curves of 8 plotted trials",
            f"/experiments/{exp_id}/metrics",
            {"trial_ids": plotted, "max_datapoints": 1000},
            0.300,
            "sidebar",
        ),
        (
            "validation curves, 10 per trial",
            f"/experiments/{exp_id}/metrics",
            {"group": "validation", "max_datapoints": 10},
            0.300,
            "widget",
        ),
        (
            "page of 50 trials, best first",
            f"/experiments/{exp_id}/trials",
            {"limit": 50, "order_by": "best"},
            0.100,
            "API",
        ),
        (
            "one trial, 200 per group",
            f"/trials/{one}/metrics",
            {"max_datapoints": 200},
            0.100,
            "API",
        ),
        ("every trial (unbounded)", f"/experiments/{exp_id}/trials", {}, None, "reference"),
        ("one trial's 1,000 reports (unbounded)", f"/trials/{one}/metrics", {}, None, "reference"),
        (
            "every validation (unbounded)",
            f"/experiments/{exp_id}/metrics",
            {"group": "validation"},
            None,
            "reference",
        ),
    ]


def _floor_query(answer: dict) -> Callable[[sqlite3.Connection], list]:
    """Read the rows `answer` holds straight from SQLite, JSON decoded."""
    if "metrics" in answer:
        ids = json.dumps([report["id"] for report in answer["metrics"]])

        def metrics_rows(conn: sqlite3.Connection) -> list:
            return [
                (*row[:-1], json.loads(row[-1]))
                for row in conn.execute(
                    "SELECT id, trial_id, trial_run_id, group_name, steps_completed, report_time, "
                    "metrics FROM metrics WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
                    (ids,),
                )
            ]

        return metrics_rows
    ids = json.dumps([trial["id"] for trial in answer["trials"]])

    def trial_rows(conn: sqlite3.Connection) -> list:
        rows = conn.execute(
            "SELECT t.*, t.hparams, lt.metrics, lv.metrics, bv.metrics FROM trials t "
            "LEFT JOIN metrics lt ON lt.id = t.latest_training_id "
            "LEFT JOIN metrics lv ON lv.id = t.latest_validation_id "
            "LEFT JOIN metrics bv ON bv.id = t.best_validation_id "
            "WHERE t.id IN (SELECT value FROM json_each(?)) ORDER BY t.id",
            (ids,),
        ).fetchall()
        return [list(row[:-4]) + [json.loads(v) if v else None for v in row[-4:]] for row in rows]

    return trial_rows


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-read-") as tmp:
        root = pathlib.Path(tmp) / "root"
        root.mkdir()
        started = time.perf_counter()
        exp_id = populate(root)
        print(f"populated {TRIALS} x {POINTS} in {time.perf_counter() - started:.0f}s", flush=True)
        with running_master(cpu_slots=WRITERS, root_dir=root) as master:
            trials = [t["id"] for t in master.trials(exp_id)]
            views = _views(exp_id, trials)
            writer_trials, writer_exp = sleeping_trials(master, WRITERS)
            ctx = multiprocessing.get_context("spawn")
            stop, counts = ctx.Event(), ctx.Queue()
            writers = [
                ctx.Process(target=_writer, args=(master.url, master.token, t, stop, counts))
                for t in writer_trials
            ]
            try:
                for process in writers:
                    process.start()
                time.sleep(3)
                conn = sqlite3.connect(root / "master.db")
                results = {}
                for name, path, query, target, client in views:
                    first = master.session.get(path, query)
                    size = len(first.get("metrics", first.get("trials", [])))
                    floor_query = _floor_query(first)
                    api, floor = [], []
                    for _ in range(REQUESTS):
                        t = time.perf_counter()
                        master.session.get(path, query)
                        api.append(time.perf_counter() - t)
                        t = time.perf_counter()
                        floor_query(conn)
                        floor.append(time.perf_counter() - t)
                    results[name] = (api, floor, target, client, size)
                    print(
                        f"{client}: {name} ({size} objects): API p50 {median(api) * 1000:.0f} ms "
                        f"p95 {percentile(api, 95) * 1000:.0f} ms; floor p50 "
                        f"{median(floor) * 1000:.1f} ms",
                        flush=True,
                    )
                conn.close()
            finally:
                stop.set()
                reported = sum(counts.get(timeout=60) for _ in writers)
                for process in writers:
                    process.join(30)
                master.session.post(f"/experiments/{writer_exp}/kill", {})
                wait_for_experiment(master, writer_exp)
    lines = [
        "| client | view | objects | API p50 | API p95 | target p95 | floor p50 | floor p95 "
        "| p50 ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    misses = []
    for name, (api, floor, target, client, size) in results.items():
        p95 = percentile(api, 95)
        if target is None:
            goal = "—"
        else:
            goal = f"{target * 1000:.0f} ms: {verdict(p95, target, at_most=True)}"
            if p95 > target:
                misses.append(name)
        lines.append(
            f"| {client} | {name} | {size} | {median(api) * 1000:.0f} ms | "
            f"{p95 * 1000:.0f} ms | {goal} | {median(floor) * 1000:.1f} ms | "
            f"{percentile(floor, 95) * 1000:.1f} ms | "
            f"{median(api) / median(floor):.1f}x |"
        )
    result = (
        "Result: PASS" if not misses else f"Result: FAIL — p95 over target: {', '.join(misses)}"
    )
    record(
        "API read latency (bench_api_read_latency.py)",
        f"Targets: p95 <= 300 ms for what the sidebar and the widget request, <= 100 ms for a "
        f"page of trials and one trial downsampled (unbounded reads: reference only).\n\n"
        f"Workload: a finished experiment of {TRIALS} trials x {POINTS} reports, read "
        f"{REQUESTS} times per view while {WRITERS} writers each POST a report every 10 ms "
        f"({reported} reports written during the run). Floor: SQLite reading the rows the "
        f"answer holds straight from sqlite3, JSON decoded, interleaved with the API calls."
        f"\n\n" + "\n".join(lines) + f"\n\n{result}",
    )


if __name__ == "__main__":
    main()
