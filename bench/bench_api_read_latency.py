"""API read latency under write load: an experiment of 1,000 trials x 1,000 points.

Workload: a finished experiment of 1,000 trials, each with 1,000 metric reports (900 training,
100 validation; one scalar `loss` each), written into a fresh store with master-lite's own
`Store` before the master starts (running 1,000 real trials would take an hour and measure the
scheduler, not reads). While 16 writer processes each POST one report to their own trial every
10 ms (real trials of another experiment; user token), we time, REQUESTS times each:
  * `GET /experiments/{id}/trials` — the trials with their latest/best metrics (the table view);
  * `GET /experiments/{id}/metrics?group=validation` — 100,000 reports (the chart view);
  * `GET /trials/{id}/metrics` — one trial's 1,000 reports.
Floor (same run, same load): the SQLite query alone that each view needs, through Python's
sqlite3 on the same file, rows decoded as JSON — what any server on this store must pay.

Ideal: the floor; we report p50/p95 of both and the ratio of p50s.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (median, percentile, record, running_master,  # noqa: E402
                     sleeping_trials, wait_for_experiment)

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
        {"name": "bench-read", "entrypoint": "true",
         "searcher": {"name": "random", "metric": "loss", "max_trials": TRIALS,
                      "max_length": 1},
         "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}}},
        default_checkpoint_storage={"type": "shared_fs",
                                    "host_path": str(root / "checkpoints")})
    now = time.time() - 3600
    exp_id = store.insert("experiments", name="bench-read", state="COMPLETED", config=config,
                          progress=1.0, start_time=now, end_time=now + 1800,
                          searcher_shutdown=1)
    validation_every = POINTS // 100 or 1
    with store.transaction() as conn:
        for index in range(TRIALS):
            trial_id = conn.execute(
                "INSERT INTO trials (experiment_id, request_id, state, hparams, seed, run_id, "
                "steps_completed, progress, start_time, end_time, closed) "
                "VALUES (?, ?, 'COMPLETED', ?, ?, 1, ?, 1.0, ?, ?, 1)",
                (exp_id, index + 1, json.dumps({"lr": 0.001 + index * 1e-4}), index, POINTS,
                 now, now + 60)).lastrowid
            rows = [(trial_id, 1, "validation" if step % validation_every == 0 else "training",
                     step, json.dumps({"loss": 1.0 / step + index * 1e-6}), None, now + step)
                    for step in range(1, POINTS + 1)]
            conn.executemany(
                "INSERT INTO metrics (trial_id, trial_run_id, group_name, steps_completed, "
                "metrics, batch_metrics, report_time) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            latest = {group: conn.execute(
                "SELECT MAX(id) FROM metrics WHERE trial_id = ? AND group_name = ?",
                (trial_id, group)).fetchone()[0] for group in ("training", "validation")}
            best = conn.execute(
                "SELECT id FROM metrics WHERE trial_id = ? AND group_name = 'validation' "
                "ORDER BY json_extract(metrics, '$.loss') LIMIT 1", (trial_id,)).fetchone()[0]
            conn.execute("UPDATE trials SET latest_training_id = ?, latest_validation_id = ?, "
                         "best_validation_id = ? WHERE id = ?",
                         (latest["training"], latest["validation"], best, trial_id))
    store.close()
    return exp_id


def _writer(url: str, token: str, trial_id: int, stop: multiprocessing.Event,
            counts: multiprocessing.Queue) -> None:
    from determined.common.api import Session
    session = Session(url, token)
    step = 0
    next_time = time.monotonic()
    while not stop.is_set():
        step += 1
        session.post(f"/trials/{trial_id}/metrics", {"reports": [
            {"group": "training", "steps_completed": step, "metrics": {"loss": 1.0 / step}}]})
        next_time += 0.01
        time.sleep(max(0.0, next_time - time.monotonic()))
    counts.put(step)
    session.close()


def _floor_queries(db: pathlib.Path, exp_id: int, one_trial: int) -> dict:
    """The SQL each view needs, straight from SQLite, JSON decoded."""
    def trials_view(conn):
        rows = conn.execute(
            "SELECT t.*, t.hparams, lt.metrics, lv.metrics, bv.metrics FROM trials t "
            "LEFT JOIN metrics lt ON lt.id = t.latest_training_id "
            "LEFT JOIN metrics lv ON lv.id = t.latest_validation_id "
            "LEFT JOIN metrics bv ON bv.id = t.best_validation_id "
            "WHERE t.experiment_id = ? ORDER BY t.id", (exp_id,)).fetchall()
        return [list(row[:-4]) + [json.loads(v) if v else None for v in row[-4:]]
                for row in rows]

    def metrics_view(conn, where, params):
        return [json.loads(row[0]) for row in conn.execute(
            f"SELECT metrics FROM metrics WHERE {where} ORDER BY id", params)]

    return {
        "trials": trials_view,
        "experiment validation metrics": lambda conn: metrics_view(
            conn, "trial_id IN (SELECT id FROM trials WHERE experiment_id = ?) "
                  "AND group_name = 'validation'", (exp_id,)),
        "one trial's metrics": lambda conn: metrics_view(conn, "trial_id = ?", (one_trial,)),
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-read-") as tmp:
        root = pathlib.Path(tmp) / "root"
        root.mkdir()
        started = time.perf_counter()
        exp_id = populate(root)
        print(f"populated {TRIALS} x {POINTS} in {time.perf_counter() - started:.0f}s", flush=True)
        with running_master(cpu_slots=WRITERS, root_dir=root) as master:
            one_trial = master.trials(exp_id)[0]["id"]
            views = {
                "trials": f"/experiments/{exp_id}/trials",
                "experiment validation metrics": f"/experiments/{exp_id}/metrics?group=validation",
                "one trial's metrics": f"/trials/{one_trial}/metrics",
            }
            writer_trials, writer_exp = sleeping_trials(master, WRITERS)
            ctx = multiprocessing.get_context("spawn")
            stop, counts = ctx.Event(), ctx.Queue()
            writers = [ctx.Process(target=_writer, args=(master.url, master.token, t, stop, counts))
                       for t in writer_trials]
            try:
                for process in writers:
                    process.start()
                time.sleep(3)
                floor_queries = _floor_queries(root / "master.db", exp_id, one_trial)
                conn = sqlite3.connect(root / "master.db")
                results = {}
                for name, path in views.items():
                    api, floor = [], []
                    for _ in range(REQUESTS):
                        t = time.perf_counter()
                        master.session.get(path.split("?")[0], dict(
                            [path.split("?")[1].split("=")]) if "?" in path else None)
                        api.append(time.perf_counter() - t)
                        t = time.perf_counter()
                        floor_queries[name](conn)
                        floor.append(time.perf_counter() - t)
                    results[name] = (api, floor)
                    print(f"{name}: API p50 {median(api) * 1000:.0f} ms p95 "
                          f"{percentile(api, 95) * 1000:.0f} ms; floor p50 "
                          f"{median(floor) * 1000:.0f} ms", flush=True)
                conn.close()
            finally:
                stop.set()
                reported = sum(counts.get(timeout=60) for _ in writers)
                for process in writers:
                    process.join(30)
                master.session.post(f"/experiments/{writer_exp}/kill", {})
                wait_for_experiment(master, writer_exp)
    lines = ["| view | API p50 | API p95 | floor p50 | floor p95 | p50 ratio |",
             "|---|---|---|---|---|---|"]
    for name, (api, floor) in results.items():
        lines.append(f"| {name} | {median(api) * 1000:.0f} ms | {percentile(api, 95) * 1000:.0f} ms"
                     f" | {median(floor) * 1000:.0f} ms | {percentile(floor, 95) * 1000:.0f} ms | "
                     f"{median(api) / median(floor):.1f}x |")
    record("API read latency (bench_api_read_latency.py)",
           f"Workload: a finished experiment of {TRIALS} trials x {POINTS} reports, read "
           f"{REQUESTS} times per view while {WRITERS} writers each POST a report every 10 ms "
           f"({reported} reports written during the run). Floor: the same SQL straight from "
           f"sqlite3, JSON decoded, interleaved with the API calls.\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
