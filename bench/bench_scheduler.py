"""Decision time of the scheduling policy at scale: hundreds of users, thousands of trials,
64 slots (issue 30). Pure function, no master: `decide` over a snapshot of a busy cluster.

Snapshot: 300 users with 10 waiting trials each (3000 requests, a few experiments each, mixed
priorities and weights), 64 running 1-slot trials of 64 users, all past the minimum run time;
every request is new to the pass, so fair share computes every share and looks for victims.
Measured: fair_share, priority with preemption, and the baseline of the same run, the rule this
master had before (priority order without preemption, `HISTORICAL_POLICY`). 300 decisions of
each, interleaved; p50 and p95 per decision, and the ratio of the p50s to the baseline's.
"""

from __future__ import annotations

import random
import time

from _common import percentile, record  # type: ignore[import-not-found]

from master_lite.scheduler import HISTORICAL_POLICY, Holding, Policy, Request, decide

USERS = 300
PER_USER = 10
SLOTS = 64
REPEATS = 300
TARGET_MS = 10.0


def snapshot(seed: int = 7) -> tuple[list[Holding], list[Request]]:
    rng = random.Random(seed)
    holdings = [
        Holding(
            key=f"run-{i}",
            user=f"user{i}",
            experiment_id=i * 10,
            slots=1,
            started=float(i),
            priority=rng.choice((30, 42, 50)),
            order=i,
        )
        for i in range(SLOTS)
    ]
    requests = [
        Request(
            key=f"req-{u}-{n}",
            user=f"user{u}",
            experiment_id=u * 10 + n % 3,
            slots=rng.choice((1, 1, 1, 2)),
            order=1000 + u * PER_USER + n,
            priority=rng.choice((10, 42, 42, 60)),
            weight=rng.choice((0.5, 1.0, 2.0)),
        )
        for u in range(USERS)
        for n in range(PER_USER)
    ]
    return holdings, requests


def main() -> None:
    holdings, requests = snapshot()
    policies = {
        "baseline (priority order, no preemption)": HISTORICAL_POLICY,
        "fair_share": Policy(kind="fair_share", min_run_seconds=10),
        "priority, preemption on": Policy(kind="priority", min_run_seconds=10),
    }
    times: dict[str, list[float]] = {name: [] for name in policies}
    outcome: dict[str, tuple[int, int]] = {}
    for _ in range(REPEATS):
        for name, policy in policies.items():
            start = time.perf_counter()
            decision = decide({"default": SLOTS}, holdings, requests, policy, 1000.0)
            times[name].append((time.perf_counter() - start) * 1000)
            outcome[name] = (len(decision.grants), len(decision.preempt))
    base = percentile(times[next(iter(policies))], 50)
    rows = []
    for name, values in times.items():
        p50, p95 = percentile(values, 50), percentile(values, 95)
        grants, preempt = outcome[name]
        verdict = "meets target" if p95 < TARGET_MS else "MISSES target"
        rows.append(
            f"| {name} | {p50:.2f} | {p95:.2f} | {p50 / base:.2f} | {preempt} | "
            f"p95 < {TARGET_MS:.0f} ms: {verdict} |"
        )
        print(f"{name}: p50 {p50:.2f} ms, p95 {p95:.2f} ms, preempts {preempt}")
    body = (
        f"Workload: one decision over {USERS} users x {PER_USER} waiting trials "
        f"({USERS * PER_USER} requests) and {SLOTS} running trials on {SLOTS} slots "
        f"(`master_lite.scheduler.decide`, pure); {REPEATS} decisions per policy, interleaved. "
        "Baseline: this master's rule before issue 30 (priority order, gang, head-of-line "
        "reservation, no preemption), same snapshot, same run.\n\n"
        "| policy | p50 ms | p95 ms | p50 / baseline | runs preempted | target |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows)
    )
    record("Scheduler decision time (bench_scheduler.py)", body)


if __name__ == "__main__":
    main()
