"""Load soak (`make soak`; loopback only, bounded in time): 32 trials reporting every 10 ms.

Workload: a master with 32 CPU slots runs 32 real trials of one experiment; each trial is a
Core API script that calls `report_training_metrics` every 10 ms for DURATION seconds (default
60) and then prints how many it sent. Report latency is measured end to end by a probe thread
that POSTs one report every 10 ms itself (user token, to a trial of its own) and times each POST
until the master answers (the answer comes after the report is committed to SQLite).

Checks (exit status 1 when one fails):
* zero points lost: every trial's stored training reports = the number it says it sent;
* p99 report latency (probe) < 100 ms;
* master memory flat: RSS at the end ≤ 1.2 x RSS after the first 10 s (+ 20 MiB slack).
Results go to bench/RESULTS.md ("Soak: load").
Run: PYTHONPATH=harness:. python soak/soak_load.py [--seconds 60]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from _common import (context_tarball, percentile, record, running_master,  # noqa: E402
                     wait_for_experiment, wait_until)

TRIALS = 32

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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    failures: list[str] = []
    with running_master(cpu_slots=TRIALS + 1) as master:
        config = {"name": "soak-load", "entrypoint": f"python3 train.py {args.seconds}",
                  "max_restarts": 0,
                  "searcher": {"name": "grid", "metric": "loss", "max_length": 1,
                               "max_concurrent_trials": TRIALS},
                  "hyperparameters": {"i": {"type": "categorical", "vals": list(range(TRIALS))}}}
        exp_id = master.create_experiment(config, context_tarball({"train.py": TRIAL_SCRIPT}))
        wait_until(lambda: sum(t["state"] == "ACTIVE" for t in master.trials(exp_id)) == TRIALS,
                   120, f"{TRIALS} running trials")
        # The probe: one more trial id to post to (a sleeping trial of its own experiment).
        probe_exp = master.create_experiment(
            {"name": "soak-probe", "entrypoint": "sleep 3600", "max_restarts": 0,
             "searcher": {"name": "single", "metric": "loss", "max_length": 1}}, None)
        probe_trial = wait_until(lambda: master.trials(probe_exp), 60, "the probe trial")[0]["id"]
        latencies: list[float] = []
        stop = threading.Event()

        def probe() -> None:
            from determined.common.api import Session
            session = Session(master.url, master.token)
            step = 0
            while not stop.is_set():
                step += 1
                started = time.perf_counter()
                session.post(f"/trials/{probe_trial}/metrics", {"reports": [
                    {"group": "training", "steps_completed": step, "metrics": {"x": 1.0}}]})
                latencies.append(time.perf_counter() - started)
                time.sleep(max(0.0, 0.01 - (time.perf_counter() - started)))
            session.close()

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        pid = master.process.pid
        time.sleep(min(10.0, args.seconds / 4))
        rss_early = rss_bytes(pid)
        samples = [rss_early]
        while master.session.get(f"/experiments/{exp_id}")["experiment"]["state"] == "ACTIVE":
            samples.append(rss_bytes(pid))
            time.sleep(2)
        rss_end = rss_bytes(pid)
        stop.set()
        prober.join(30)
        experiment = wait_for_experiment(master, exp_id, timeout=300)
        lost = 0
        for trial in master.trials(exp_id):
            logs = master.logs(trial["id"])
            sent_lines = [line for line in logs if line.startswith("SOAK_SENT ")]
            if not sent_lines:
                failures.append(f"trial {trial['id']} did not report its count "
                                f"({trial['state']}): {logs[-5:]}")
                continue
            sent = int(sent_lines[-1].split()[1])
            stored = len(master.series(trial["id"], "training"))
            lost += sent - stored
            if stored != sent:
                failures.append(f"trial {trial['id']}: sent {sent}, stored {stored}")
        total = sum(len(master.series(t["id"], "training")) for t in master.trials(exp_id))
        master.session.post(f"/experiments/{probe_exp}/kill", {})
        wait_for_experiment(master, probe_exp)
    p50, p99 = percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000
    if experiment["state"] != "COMPLETED":
        failures.append(f"experiment ended {experiment['state']}")
    if p99 >= 100:
        failures.append(f"p99 report latency {p99:.0f} ms ≥ 100 ms")
    if rss_end > 1.2 * rss_early + 20 * 2 ** 20:
        failures.append(f"master RSS grew from {rss_early / 2**20:.0f} MiB to "
                        f"{rss_end / 2**20:.0f} MiB")
    summary = (f"{TRIALS} trials x {args.seconds:.0f} s reporting every 10 ms: {total} reports "
               f"stored, {lost} lost; probe report latency p50 {p50:.1f} ms, p99 {p99:.1f} ms "
               f"({len(latencies)} probes); master RSS {rss_early / 2**20:.0f} MiB at "
               f"{min(10.0, args.seconds / 4):.0f} s -> {rss_end / 2**20:.0f} MiB at the end "
               f"(max {max(samples) / 2**20:.0f} MiB)")
    print(summary)
    for failure in failures:
        print("FAIL:", failure)
    record("Soak: load (soak/soak_load.py)",
           f"Targets: zero points lost, p99 report latency < 100 ms, master memory flat.\n\n"
           f"{summary}.\n\nResult: {'PASS' if not failures else 'FAIL — ' + '; '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
