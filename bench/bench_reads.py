"""Concurrent reads: many clients listing 2,000 experiments, and the curve reads under writers.

Workload (written into a fresh store with master-lite's own `Store` before the master starts):
EXPERIMENTS finished experiments of one trial each (10 training + 10 validation reports, the
expanded config of a `single` search), plus one finished experiment of TRIALS trials x POINTS
reports (as bench_api_read_latency.py). Two phases against each master:

  * list: CLIENTS threads each send REQUESTS `GET /experiments` (the sidebar's list, every
    experiment) one after the other; the wall time for all of them and each request's latency;
  * curves under writers: while WRITERS writer processes each POST one report to their own
    trial every 10 ms, CURVE_REQUESTS times each, what the sidebar and the widget read for the
    big experiment's curves: `GET /experiments/{id}/metrics?trial_ids=<8 plotted>&
    max_datapoints=1000` (sidebar) and `?group=validation&max_datapoints=<widget's points per
    trial>` (widget), p50 and p95.

Baseline: the same bench against the master of BENCH_READS_BASELINE (a git ref, default the
commit before the read pool: reads on the event loop, N+1 queries for the list), unpacked with
`git archive` and run on a copy of the same store, in the same process run. Ours: this tree.

Targets (issue 26, row 17): p95 <= 300 ms for the sidebar's and the widget's curve reads under
16 writers; the list phase reported as the ratio baseline / ours.
Run: PYTHONPATH=harness:. python bench/bench_reads.py
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    ROOT,
    MasterProcess,
    median,
    percentile,
    record,
    sleeping_trials,
    verdict,
    wait_for_experiment,
)

EXPERIMENTS = int(os.environ.get("BENCH_READS_EXPERIMENTS", "2000"))
CLIENTS = int(os.environ.get("BENCH_READS_CLIENTS", "20"))
REQUESTS = int(os.environ.get("BENCH_READS_REQUESTS", "40"))
CURVE_REQUESTS = int(os.environ.get("BENCH_READS_CURVE_REQUESTS", "30"))
BASELINE = os.environ.get("BENCH_READS_BASELINE", "27d0a20")
WRITERS = 16
TARGET_P95 = 0.300
os.environ.setdefault("BENCH_READ_TRIALS", "1000")
os.environ.setdefault("BENCH_READ_POINTS", "1000")
from bench_api_read_latency import POINTS, TRIALS, _writer  # noqa: E402
from bench_api_read_latency import populate as populate_curves  # noqa: E402


def populate_list(root: pathlib.Path) -> None:
    """EXPERIMENTS finished experiments of one trial with 10 + 10 reports each."""
    from determined.common import expconf
    from master_lite.store import Store

    store = Store(root / "master.db")
    config = expconf.apply_defaults(
        {
            "name": "bench-list",
            "entrypoint": "true",
            "searcher": {"name": "single", "metric": "loss", "max_length": 1},
            "hyperparameters": {"lr": 0.01},
        },
        default_checkpoint_storage={"type": "shared_fs", "host_path": str(root / "checkpoints")},
    )
    text = json.dumps(config)
    now = time.time() - 7200
    with store.transaction() as conn:
        for index in range(EXPERIMENTS):
            exp_id = conn.execute(
                "INSERT INTO experiments (name, state, config, progress, start_time, end_time, "
                "searcher_shutdown) VALUES (?, 'COMPLETED', ?, 1.0, ?, ?, 1)",
                (f"list-{index}", text, now, now + 60),
            ).lastrowid
            trial_id = conn.execute(
                "INSERT INTO trials (experiment_id, request_id, state, hparams, seed, run_id, "
                "steps_completed, progress, start_time, end_time, closed) "
                "VALUES (?, 1, 'COMPLETED', '{\"lr\":0.01}', ?, 1, 10, 1.0, ?, ?, 1)",
                (exp_id, index, now, now + 60),
            ).lastrowid
            conn.executemany(
                "INSERT INTO metrics (trial_id, trial_run_id, group_name, steps_completed, "
                "metrics, batch_metrics, report_time) VALUES (?, 1, ?, ?, ?, NULL, ?)",
                [
                    (trial_id, group, step, json.dumps({"loss": 1.0 / step}), now + step)
                    for step in range(1, 11)
                    for group in ("training", "validation")
                ],
            )
            last = conn.execute("SELECT MAX(id) FROM metrics WHERE trial_id = ?", (trial_id,))
            last_id = last.fetchone()[0]
            conn.execute(
                "UPDATE trials SET latest_training_id = ?, latest_validation_id = ?, "
                "best_validation_id = ? WHERE id = ?",
                (last_id - 1, last_id, last_id, trial_id),
            )
    store.close()


def baseline_tree(tmp: pathlib.Path) -> pathlib.Path | None:
    """The baseline's sources, unpacked from git (None when this is no git checkout)."""
    tree = tmp / "baseline"
    tree.mkdir()
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BASELINE], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"no baseline ({BASELINE}): {error}", flush=True)
        return None
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def list_phase(url: str, token: str) -> tuple[float, list[float]]:
    """CLIENTS threads x REQUESTS `GET /experiments`: (wall seconds, each latency)."""
    latencies: list[float] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    address = urllib.parse.urlsplit(url)
    headers = {"Authorization": f"Bearer {token}"}

    def client() -> None:
        # http.client reads a body in one call: the clients' own cost stays small next to the
        # master's (these threads share this process's GIL).
        conn = http.client.HTTPConnection(address.hostname, address.port, timeout=600)
        try:
            for _ in range(REQUESTS):
                start = time.perf_counter()
                conn.request("GET", f"{address.path}/api/v1/experiments", headers=headers)
                answer = conn.getresponse()
                body = answer.read()
                if answer.status != 200 or not body.startswith(b'{"experiments"'):
                    raise RuntimeError(f"GET /experiments answered {answer.status}: {body[:200]!r}")
                with lock:
                    latencies.append(time.perf_counter() - start)
        except BaseException as error:  # reported below: a failed client fails the bench
            errors.append(error)
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"a list client failed: {errors[0]!r}")
    return time.perf_counter() - start, latencies


def curve_views(exp_id: int, trials: list[int]) -> list[tuple[str, str, dict]]:
    from jupyter_determined.kernel._widget import curve_points_per_trial

    return [
        (
            "sidebar: curves of 8 plotted trials",
            f"/experiments/{exp_id}/metrics",
            {"trial_ids": ",".join(map(str, trials[:8])), "max_datapoints": 1000},
        ),
        (
            "widget: validation curves",
            f"/experiments/{exp_id}/metrics",
            {"group": "validation", "max_datapoints": curve_points_per_trial(len(trials))},
        ),
    ]


def curves_phase(master: MasterProcess, exp_id: int) -> tuple[dict[str, list[float]], int]:
    """The curve reads while WRITERS writers report: latencies per view, reports written."""
    trials = [t["id"] for t in master.trials(exp_id)]
    writer_trials, writer_exp = sleeping_trials(master, WRITERS)
    ctx = multiprocessing.get_context("spawn")
    stop, counts = ctx.Event(), ctx.Queue()
    writers = [
        ctx.Process(target=_writer, args=(master.url, master.token, t, stop, counts))
        for t in writer_trials
    ]
    results: dict[str, list[float]] = {}
    try:
        for process in writers:
            process.start()
        time.sleep(3)  # the writers' interpreters start
        for name, path, query in curve_views(exp_id, trials):
            master.session.get(path, query)
            latencies = []
            for _ in range(CURVE_REQUESTS):
                start = time.perf_counter()
                master.session.get(path, query)
                latencies.append(time.perf_counter() - start)
            results[name] = latencies
    finally:
        stop.set()
        reported = sum(counts.get(timeout=120) for _ in writers)
        for process in writers:
            process.join(30)
        master.session.post(f"/experiments/{writer_exp}/kill", {})
        wait_for_experiment(master, writer_exp)
    return results, reported


def measure(name: str, tree: pathlib.Path, store: pathlib.Path, work: pathlib.Path) -> dict:
    root = work / f"root-{name}"
    shutil.copytree(store, root)
    env = {
        "PYTHONPATH": os.pathsep.join([str(tree / "harness"), str(tree)]),
        "MASTER_LITE_PREEMPTION_GRACE_SECONDS": "3",
    }
    # Started from the tree's directory: `python -m master_lite` puts the working directory
    # first on sys.path, ahead of PYTHONPATH (from here, the baseline would run this tree).
    here = os.getcwd()
    os.chdir(tree)
    try:
        master = MasterProcess(root, cpu_slots=WRITERS, env=env)
    finally:
        os.chdir(here)
    with master:
        exp_id = next(
            e["id"]
            for e in master.session.get("/experiments")["experiments"]
            if e["name"] == "bench-read"
        )
        wall, latencies = list_phase(master.url, master.token)
        print(
            f"{name}: {CLIENTS} x {REQUESTS} GET /experiments in {wall:.1f} s, p50 "
            f"{median(latencies) * 1000:.0f} ms p95 {percentile(latencies, 95) * 1000:.0f} ms",
            flush=True,
        )
        started = time.perf_counter()
        curves, reported = curves_phase(master, exp_id)
        writes_per_second = reported / (time.perf_counter() - started)
        for view, values in curves.items():
            print(
                f"{name}: {view}: p50 {median(values) * 1000:.0f} ms "
                f"p95 {percentile(values, 95) * 1000:.0f} ms",
                flush=True,
            )
    return {
        "wall": wall,
        "list": latencies,
        "curves": curves,
        "reported": reported,
        "writes": writes_per_second,
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-reads-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        store = tmp / "store"
        store.mkdir()
        started = time.perf_counter()
        populate_list(store)
        populate_curves(store)
        print(
            f"populated {EXPERIMENTS} experiments and {TRIALS} x {POINTS} in "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
        variants = {}
        tree = baseline_tree(tmp)
        if tree is not None:
            variants[f"baseline ({BASELINE})"] = measure("baseline", tree, store, tmp)
        variants["ours"] = measure("ours", ROOT, store, tmp)
    views = list(variants["ours"]["curves"])
    lines = [
        f"| master | {CLIENTS} x {REQUESTS} GET /experiments: wall | list p50 | list p95 | "
        + " | ".join(f"{view} p50 / p95" for view in views)
        + " | reports stored/s meanwhile |",
        "|---|---|---|---|" + "---|" * len(views) + "---|",
    ]
    for name, result in variants.items():
        curves = " | ".join(
            f"{median(result['curves'][v]) * 1000:.0f} / "
            f"{percentile(result['curves'][v], 95) * 1000:.0f} ms"
            for v in views
        )
        lines.append(
            f"| {name} | {result['wall']:.1f} s | {median(result['list']) * 1000:.0f} ms | "
            f"{percentile(result['list'], 95) * 1000:.0f} ms | {curves} | "
            f"{result['writes']:.0f} |"
        )
    ours = variants["ours"]
    misses = [v for v in views if percentile(ours["curves"][v], 95) > TARGET_P95]
    verdicts = "; ".join(
        f"{v}: p95 {percentile(ours['curves'][v], 95) * 1000:.0f} ms, "
        f"{verdict(percentile(ours['curves'][v], 95), TARGET_P95, at_most=True)}"
        for v in views
    )
    ratio = ""
    baseline = next((r for n, r in variants.items() if n != "ours"), None)
    if baseline is not None:
        ratio = (
            f" The list phase took {baseline['wall'] / ours['wall']:.1f}x less wall time "
            f"than the baseline's (p50 {median(baseline['list']) / median(ours['list']):.1f}x)."
        )
    result = "Result: PASS" if not misses else f"Result: FAIL — p95 over target: {misses}"
    record(
        "Concurrent reads (bench_reads.py)",
        f"Target: p95 <= {TARGET_P95 * 1000:.0f} ms for the sidebar's and the widget's curve "
        f"reads under {WRITERS} writers; the list phase as a ratio to the baseline.\n\n"
        f"Workload: {EXPERIMENTS} finished experiments (one trial, 20 reports each) and one of "
        f"{TRIALS} trials x {POINTS} reports; {CLIENTS} client threads x {REQUESTS} "
        f"`GET /experiments` (no writers), then each curve read {CURVE_REQUESTS} times while "
        f"{WRITERS} writers each POST a report every 10 ms (ours: {ours['reported']} reports "
        f"written). Baseline: the master of `{BASELINE}` (reads on the event loop, two queries "
        f"per listed experiment), same store, same run. Reports stored/s: the writers' rate "
        f"during the curve phase (a read on the event loop holds every write while it runs; "
        f"ours runs reads in the read pool, and a report waits, at most 250 ms, while reads "
        f"are in flight: the curve phase reads back to back, so it is the writers' worst "
        f"case).\n\n" + "\n".join(lines) + f"\n\n{verdicts}.{ratio}\n\n{result}",
    )


if __name__ == "__main__":
    main()
