"""Load soak (`make soak`; loopback only, bounded in time): 32 trials reporting every 10 ms.

Workload: a master with 34 CPU slots runs 32 real trials of one experiment (and two sleeping
trials the probes below post for); each trial is a Core API script that calls
`report_training_metrics` every 10 ms for DURATION seconds (default 60) and then prints how
many it sent. The Core API hands reports to a child process that posts them in batches
(harness/determined/core/_courier.py), so the master sees one POST per trial per batch.

Report latency, what it measures: the time from a `report_training_metrics`-style call until
the master has acknowledged the POST that carried the report, which it does only after the
report is committed to SQLite (durable across a master crash, docs/fault-tolerance.md). It is
taken by a probe process that reports every 10 ms, like the trials, through the Core
API's own report courier (`ReportCourier`, the same batching and flush policy; its child process
says after each POST how many reports the master has stored, and the probe stamps them then),
to a trial of its own (a sleeping trial, so the user token may post for it). That includes the
courier's coalescing waits (in the trial and in its child), the pipe, the HTTP round trip,
the master's queueing, handling and commit, and the CPU scheduling of a busy 2-core machine.
For the master's share, a second probe process times plain one-report POSTs: the round trip,
and the time the master itself spent on each (its `Server-Timing` answer header: from reading
the request's headers to the commit done; waiting to be read is not in it). The master's CPU
use over the run is reported too.

Checks (exit status 1 when one fails):
* zero points lost: every trial's stored training reports = the number it says it sent (the
  probe's too);
* p99 report latency (Core API probe) < 100 ms;
* master memory flat: RSS at the end ≤ 1.2 x RSS after the first 10 s (+ 20 MiB slack).
Results go to bench/RESULTS.md ("Soak: load") unless --no-record.
Run: PYTHONPATH=harness:. python soak/soak_load.py [--seconds 60] [--no-record]
     [--profile master.pstats]  (cProfile of the master's event loop thread, for diagnosis)
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import pathlib
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from _common import (  # noqa: E402
    MasterProcess,
    context_tarball,
    percentile,
    record,
    wait_for_experiment,
    wait_until,
)

TRIALS = 32
REPORT_INTERVAL_S = 0.01

TRIAL_SCRIPT = """
import sys, time
import determined as det
seconds = float(sys.argv[1])
with det.core.init() as core:
    sent, step = 0, 0
    deadline = time.monotonic() + seconds
    next_time = time.monotonic()
    while time.monotonic() < deadline:
        step += 1
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        sent += 1
        next_time += 0.01
        time.sleep(max(0.0, next_time - time.monotonic()))
print(f"SOAK_SENT {sent}", flush=True)
"""


def rss_bytes(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU time the process has used so far (`children`: that of its children
    that have ended and been waited for, e.g. the master's finished trial processes)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def every_10_ms(stop: Any, action: Any) -> None:
    next_time = time.perf_counter()
    while not stop.is_set():
        action()
        next_time += REPORT_INTERVAL_S
        time.sleep(max(0.0, next_time - time.perf_counter()))


def core_api_probe(url: str, token: str, trial: dict, stop: Any, results: Any) -> None:
    """Reports through the Core API's report courier every 10 ms until `stop` (in a process of
    its own, as a trial's are); puts (reports sent, latencies in seconds) on `results`."""
    import threading

    from determined.core._courier import ReportCourier

    called_at: dict[int, float] = {}
    latencies: list[float] = []
    lock = threading.Lock()
    stamped = 0

    def delivered(count: int) -> None:
        # The courier's child says how many reports the master has stored (committed) so far;
        # reports are numbered in order, so that covers steps stamped+1 .. count.
        nonlocal stamped
        now = time.perf_counter()
        with lock:
            for step in range(stamped + 1, count + 1):
                latencies.append(now - called_at.pop(step))
            stamped = max(stamped, count)

    courier = ReportCourier(url, token, trial["id"], trial["run_id"], on_delivered=delivered)
    step = 0

    def report() -> None:
        nonlocal step
        step += 1
        with lock:
            called_at[step] = time.perf_counter()
        # What core.train.report_training_metrics hands over (harness/determined/core/_train.py).
        courier.put(("training", step, {"x": 1.0}, None, time.time()))

    every_10_ms(stop, report)
    courier.close()  # posts the rest; raises if any POST failed
    results.put((step, latencies))


def post_probe(url: str, token: str, trial_id: int, stop: Any, results: Any) -> None:
    """Plain one-report POSTs every 10 ms, timed round trip (the master's share)."""
    from determined.common.api import Session

    session = Session(url, token)
    latencies: list[float] = []
    in_master: list[float] = []
    step = 0

    def post() -> None:
        nonlocal step
        step += 1
        started = time.perf_counter()
        answer = session.request(
            "POST",
            f"/trials/{trial_id}/metrics",
            json_body={
                "reports": [{"group": "training", "steps_completed": step, "metrics": {"x": 1.0}}]
            },
        )
        latencies.append(time.perf_counter() - started)
        timing = answer.headers.get("Server-Timing", "")  # "master;dur=<ms>"
        if "dur=" in timing:
            in_master.append(float(timing.split("dur=", 1)[1]) / 1000)

    every_10_ms(stop, post)
    session.close()
    results.put((latencies, in_master))


@contextlib.contextmanager
def soak_master(profile: str | None) -> Any:
    with tempfile.TemporaryDirectory(prefix="soak-master-") as tmp:
        env = {"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "3"}
        if profile:
            env["MASTER_LITE_PROFILE"] = str(pathlib.Path(profile).resolve())
        with MasterProcess(pathlib.Path(tmp) / "root", cpu_slots=TRIALS + 2, env=env) as master:
            yield master


def sleeping_trial(master: MasterProcess, name: str) -> dict:
    exp_id = master.create_experiment(
        {
            "name": name,
            "entrypoint": "sleep 3600",
            "max_restarts": 0,
            "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        },
        None,
    )
    return wait_until(lambda: master.trials(exp_id), 60, f"the {name} trial")[0]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="print the result only (do not update bench/RESULTS.md)",
    )
    parser.add_argument(
        "--profile",
        metavar="PATH",
        help="write a cProfile of the master's event loop thread to PATH",
    )
    args = parser.parse_args()
    failures: list[str] = []
    with soak_master(args.profile) as master:
        trials_cpu_start, trials_wall_start = (
            cpu_seconds(master.process.pid, children=True),
            time.monotonic(),
        )
        config = {
            "name": "soak-load",
            "entrypoint": f"python3 train.py {args.seconds}",
            "max_restarts": 0,
            "searcher": {
                "name": "grid",
                "metric": "loss",
                "max_length": 1,
                "max_concurrent_trials": TRIALS,
            },
            "hyperparameters": {"i": {"type": "categorical", "vals": list(range(TRIALS))}},
        }
        exp_id = master.create_experiment(config, context_tarball({"train.py": TRIAL_SCRIPT}))
        wait_until(
            lambda: sum(t["state"] == "ACTIVE" for t in master.trials(exp_id)) == TRIALS,
            120,
            f"{TRIALS} running trials",
        )
        # The probes post for trials of their own (sleeping, so the user token may post).
        core_probe_trial = sleeping_trial(master, "soak-probe-core-api")
        post_probe_trial = sleeping_trial(master, "soak-probe-post")
        # Each probe is a process of its own, like a trial (not threads sharing one GIL).
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        core_results, post_results = context.Queue(), context.Queue()
        probes = [
            context.Process(
                target=core_api_probe,
                args=(master.url, master.token, core_probe_trial, stop, core_results),
            ),
            context.Process(
                target=post_probe,
                args=(master.url, master.token, post_probe_trial["id"], stop, post_results),
            ),
        ]
        for probe in probes:
            probe.start()
        pid = master.process.pid
        early = min(10.0, args.seconds / 4)
        time.sleep(early)
        rss_early, cpu_early, wall_early = rss_bytes(pid), cpu_seconds(pid), time.monotonic()
        samples = [rss_early]
        while master.session.get(f"/experiments/{exp_id}")["experiment"]["state"] == "ACTIVE":
            samples.append(rss_bytes(pid))
            time.sleep(2)
        rss_end = rss_bytes(pid)
        master_cpu = (cpu_seconds(pid) - cpu_early) / (time.monotonic() - wall_early)
        stop.set()
        core_sent, core_latencies = core_results.get(timeout=120)
        post_latencies, post_in_master = post_results.get(timeout=120)
        for probe in probes:
            probe.join(60)
        experiment = wait_for_experiment(master, exp_id, timeout=300)
        # The trials' CPU (they have all ended): what the master competes with for 2 cores.
        trials_cpu = (cpu_seconds(master.process.pid, children=True) - trials_cpu_start) / (
            time.monotonic() - trials_wall_start
        )
        lost = 0
        for trial in master.trials(exp_id):
            logs = master.logs(trial["id"])
            sent_lines = [line for line in logs if line.startswith("SOAK_SENT ")]
            if not sent_lines:
                failures.append(
                    f"trial {trial['id']} did not report its count ({trial['state']}): {logs[-5:]}"
                )
                continue
            sent = int(sent_lines[-1].split()[1])
            stored = len(master.series(trial["id"], "training"))
            lost += sent - stored
            if stored != sent:
                failures.append(f"trial {trial['id']}: sent {sent}, stored {stored}")
        total = sum(len(master.series(t["id"], "training")) for t in master.trials(exp_id))
        probe_stored = len(master.series(core_probe_trial["id"], "training"))
        if probe_stored != core_sent:
            lost += core_sent - probe_stored
            failures.append(f"Core API probe: sent {core_sent}, stored {probe_stored}")
        for probe_trial in (core_probe_trial, post_probe_trial):
            master.session.post(f"/experiments/{probe_trial['experiment_id']}/kill", {})
            wait_for_experiment(master, probe_trial["experiment_id"])
    p50, p99 = percentile(core_latencies, 50) * 1000, percentile(core_latencies, 99) * 1000
    post_p50 = percentile(post_latencies, 50) * 1000
    post_p99 = percentile(post_latencies, 99) * 1000
    in_master = (
        f"p50 {percentile(post_in_master, 50) * 1000:.1f} ms, p99 "
        f"{percentile(post_in_master, 99) * 1000:.1f} ms"
        if post_in_master
        else "not reported"
    )
    if experiment["state"] != "COMPLETED":
        failures.append(f"experiment ended {experiment['state']}")
    if p99 >= 100:
        failures.append(f"p99 report latency {p99:.0f} ms ≥ 100 ms")
    if rss_end > 1.2 * rss_early + 20 * 2**20:
        failures.append(
            f"master RSS grew from {rss_early / 2**20:.0f} MiB to {rss_end / 2**20:.0f} MiB"
        )
    summary = (
        f"{TRIALS} trials x {args.seconds:.0f} s reporting every 10 ms: {total} reports "
        f"stored, {lost} lost; report latency (Core API call -> committed and "
        f"acknowledged) p50 {p50:.1f} ms, p99 {p99:.1f} ms ({len(core_latencies)} "
        f"reports); plain one-report POST round trip p50 {post_p50:.1f} ms, p99 "
        f"{post_p99:.1f} ms ({len(post_latencies)} POSTs), of which in the master "
        f"(headers read to commit done) {in_master}; "
        f"CPU: master {master_cpu:.0%} of one core, the 32 trial processes "
        f"{trials_cpu:.0%} of one core (launch to exit); master RSS {rss_early / 2**20:.0f} MiB at "
        f"{early:.0f} s -> {rss_end / 2**20:.0f} MiB at the end "
        f"(max {max(samples) / 2**20:.0f} MiB)"
    )
    print(summary)
    for failure in failures:
        print("FAIL:", failure)
    if not args.no_record:
        record(
            "Soak: load (soak/soak_load.py)",
            "Targets: zero points lost, p99 report latency < 100 ms, master memory flat. "
            "Report latency: from the report call (through the Core API's report courier) until "
            "the master acknowledged the POST carrying it, after committing it to SQLite "
            "(see the script's docstring).\n\n"
            f"{summary}.\n\nResult: {'PASS' if not failures else 'FAIL — ' + '; '.join(failures)}",
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
