"""Metrics ingestion: points per second accepted and durably stored, master-lite vs MLflow.

Workload: 1 and 16 concurrent writers (separate processes, as trials are), CALLS (32) requests of
1,000 points in all per measurement, split evenly among the writers: for master-lite a `POST
/trials/{id}/metrics` batch of 100 training reports x 10 scalar metrics (the form the harness's
MetricsShipper sends), to its own trial; for MLflow a `MlflowClient.log_batch` of 1,000 `Metric`s
(MLflow's per-call maximum) to its own run in an SQLite tracking store (`sqlite:///...`) on the same
disk. A point is one (metric name, step, value). Each writer first makes one untimed call (imports,
connection: a GET of its trial; MLflow's `get_run`). The clock runs from the writers' start until
the last writer's last call returned; then the stored rows are counted (master-lite: the SQLite
`metrics` table; MLflow: `get_metric_history`) and must all be there, else the run fails.

Ideal: the targets of issue 9 — ≥ 100k points/s and ≥ 10x MLflow's rate, from 1 and from 16
writers. Both sides run in this process run, alternating, median of REPEATS.
Run: PYTHONPATH=harness:. python bench/bench_metrics_ingestion.py  (needs mlflow==3.17.2)
"""

from __future__ import annotations

import multiprocessing
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    interleaved,
    median,
    package_version,
    record,
    running_master,
    sleeping_trials,
    wait_for_experiment,
)

POINTS_PER_CALL = 1000
METRICS_PER_REPORT = 10
# Calls per measurement, split among the writers (MLflow takes seconds per call: keep it short).
CALLS = int(os.environ.get("BENCH_INGEST_CALLS", "32"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "2"))
WRITER_COUNTS = (1, 16)


# -- writers (child processes) ----------------------------------------------------------------
def _master_writer(
    url: str,
    token: str,
    trial_id: int,
    first_step: int,
    calls: int,
    start: multiprocessing.Event,
    done: multiprocessing.Queue,
) -> None:
    from determined.common.api import Session

    session = Session(url, token)
    reports_per_call = POINTS_PER_CALL // METRICS_PER_REPORT
    bodies = []
    for batch in range(calls):
        base = first_step + batch * reports_per_call
        bodies.append(
            {
                "reports": [
                    {
                        "group": "training",
                        "steps_completed": base + i,
                        "metrics": {
                            f"m{k}": (base + i) * 0.001 + k for k in range(METRICS_PER_REPORT)
                        },
                    }
                    for i in range(reports_per_call)
                ]
            }
        )
    # Untimed: the client's imports and connection (requests loads on a session's first
    # request), as MLflow's client opens its store below; the clock measures ingestion.
    session.get(f"/trials/{trial_id}")
    start.wait()
    try:
        for body in bodies:
            answer = session.post(f"/trials/{trial_id}/metrics", body)
            assert answer["accepted"] == reports_per_call, answer
    except BaseException as exc:
        done.put(("error", repr(exc)))
        raise
    done.put((time.perf_counter(), 0))
    session.close()


def _mlflow_writer(
    tracking_uri: str,
    run_id: str,
    first_step: int,
    calls: int,
    start: multiprocessing.Event,
    done: multiprocessing.Queue,
) -> None:
    import logging

    logging.getLogger("mlflow").setLevel(logging.CRITICAL)  # lock retries are counted instead
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    reports_per_call = POINTS_PER_CALL // METRICS_PER_REPORT
    now = int(time.time() * 1000)
    batches = []
    for batch in range(calls):
        base = first_step + batch * reports_per_call
        batches.append(
            [
                Metric(f"m{k}", (base + i) * 0.001 + k, now, base + i)
                for i in range(reports_per_call)
                for k in range(METRICS_PER_REPORT)
            ]
        )
    client.get_run(run_id)  # untimed: opens the tracking store, as the master's writer connects
    start.wait()
    lock_retries = 0
    for metrics in batches:
        while True:
            try:
                client.log_batch(run_id, metrics=metrics)
                break
            except Exception as exc:  # MlflowException wrapping sqlite3 "database is locked"
                if "database is locked" not in str(exc):
                    done.put(("error", repr(exc)))
                    raise
                # SQLite allows one writer; concurrent MLflow clients must retry, as users do.
                lock_retries += 1
                time.sleep(0.05)
    done.put((time.perf_counter(), lock_retries))


def _run_writers(target, args_per_writer: list[tuple]) -> tuple[float, int]:
    """Start the writers, release them together; return (seconds until the last one finished,
    retries after "database is locked")."""
    ctx = multiprocessing.get_context("spawn")
    start, done = ctx.Event(), ctx.Queue()
    processes = [ctx.Process(target=target, args=(*args, start, done)) for args in args_per_writer]
    for p in processes:
        p.start()
    time.sleep(3)  # let every child import and build its bodies before the clock starts
    began = time.perf_counter()
    start.set()
    ends = [done.get(timeout=600) for _ in processes]
    for p in processes:
        p.join(60)
    failures = [detail for kind, detail in ends if kind == "error"]
    if failures or any(p.exitcode != 0 for p in processes):
        raise RuntimeError(f"a writer failed: {failures}")
    return max(end for end, _ in ends) - began, sum(retries for _, retries in ends)


# -- the two sides ----------------------------------------------------------------------------
class MasterSide:
    def __init__(self, master, trial_ids: list[int]) -> None:
        self.master = master
        self.trial_ids = trial_ids
        self.round = 0

    def measure(self, writers: int) -> float:
        self.round += 1
        first_step = self.round * 10_000_000  # fresh steps each round: nothing is a repeat
        before = self._stored()
        seconds, _ = _run_writers(
            _master_writer,
            [
                (
                    self.master.url,
                    self.master.token,
                    self.trial_ids[i],
                    first_step,
                    CALLS // writers,
                )
                for i in range(writers)
            ],
        )
        points = writers * (CALLS // writers) * POINTS_PER_CALL
        stored = (self._stored() - before) * METRICS_PER_REPORT
        if stored != points:
            raise AssertionError(f"master-lite stored {stored} of {points} points")
        return points / seconds

    def _stored(self) -> int:
        return self.master.db_rows("SELECT COUNT(*) AS n FROM metrics")[0]["n"]


class MlflowSide:
    def __init__(self, directory: pathlib.Path) -> None:
        from mlflow.tracking import MlflowClient

        self.uri = f"sqlite:///{directory / 'mlflow.db'}"
        self.client = MlflowClient(self.uri)
        self.experiment_id = self.client.create_experiment(
            "bench", artifact_location=(directory / "artifacts").as_uri()
        )
        self.round = 0
        self.lock_retries = 0

    def measure(self, writers: int) -> float:
        self.round += 1
        runs = [self.client.create_run(self.experiment_id).info.run_id for _ in range(writers)]
        seconds, retries = _run_writers(
            _mlflow_writer, [(self.uri, run, 0, CALLS // writers) for run in runs]
        )
        self.lock_retries += retries
        points = writers * (CALLS // writers) * POINTS_PER_CALL
        stored = sum(
            len(self.client.get_metric_history(run, f"m{k}"))
            for run in runs
            for k in range(METRICS_PER_REPORT)
        )
        if stored != points:
            raise AssertionError(f"MLflow stored {stored} of {points} points")
        return points / seconds


def main() -> None:
    lines = [
        "| writers | master-lite points/s | MLflow points/s | ratio | target |",
        "|---|---|---|---|---|",
    ]
    with (
        tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp,
        running_master(cpu_slots=max(WRITER_COUNTS)) as master,
    ):
        trial_ids, exp_id = sleeping_trials(master, max(WRITER_COUNTS))
        try:
            ours, mlflow = MasterSide(master, trial_ids), MlflowSide(pathlib.Path(tmp))
            # Warm-up (imports, SQLite page cache, the master's first requests), not counted.
            ours.measure(16)  # MLflow: its store was created and migrated in MlflowSide()
            for writers in WRITER_COUNTS:
                rates = interleaved(
                    {
                        "ours": lambda n=writers: ours.measure(n),
                        "mlflow": lambda n=writers: mlflow.measure(n),
                    },
                    REPEATS,
                )
                rate, base = median(rates["ours"]), median(rates["mlflow"])
                ratio = rate / base
                ok = rate >= 100_000 and ratio >= 10
                print(
                    f"{writers:2d} writers: master-lite {rate:,.0f} points/s "
                    f"(runs {[round(r) for r in rates['ours']]}), MLflow {base:,.0f} points/s "
                    f"(runs {[round(r) for r in rates['mlflow']]}), ratio {ratio:.1f}x",
                    flush=True,
                )
                lines.append(
                    f"| {writers} | {rate:,.0f} | {base:,.0f} | {ratio:.1f}x | "
                    f"≥ 100k and ≥ 10x: {'meets target' if ok else 'MISSES target'} |"
                )
        finally:
            master.session.post(f"/experiments/{exp_id}/kill", {})
            wait_for_experiment(master, exp_id)
    record(
        "Metrics ingestion (bench_metrics_ingestion.py)",
        f"Workload: {CALLS} calls x {POINTS_PER_CALL} points per measurement, split among the "
        f"writer processes "
        f"({POINTS_PER_CALL // METRICS_PER_REPORT} reports x {METRICS_PER_REPORT} metrics); "
        f"every point is verified stored afterwards. Baseline: MLflow "
        f"{package_version('mlflow')} `log_batch` into an SQLite tracking store. Median of "
        f"{REPEATS} alternating runs. MLflow's concurrent writers hit SQLite's \"database is "
        f'locked" {mlflow.lock_retries} times in all and retried (50 ms pause), as its '
        f"users must.\n\n" + "\n".join(lines),
    )


if __name__ == "__main__":
    main()
