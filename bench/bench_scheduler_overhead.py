"""Scheduler overhead: 200 one-second trials on 2 slots, wall time vs the ideal.

Workload: one experiment, `random` searcher with max_trials 200, on a master with 2 CPU slots;
each trial is a Core API script that sleeps 1 s and reports one validation metric. The clock
runs from `POST /experiments` until the experiment is COMPLETED. Everything that is not the
1 s of work — spawning the process, Python start-up and imports, the trial's API calls, the
scheduler noticing a free slot — is overhead.

Ideal: 200 x 1 s / 2 slots = 100 s. Target: ratio ≤ 1.10. There is no other system in the
loop, so no baseline process; the ideal is the baseline.

The master runs as configured by default, so `python3 train.py` trials run in pre-started
interpreters (docs/internals.md); MASTER_LITE_PRESTARTED_INTERPRETERS=0 in this process's
environment turns them off, to compare with fresh processes. The clock includes the fresh
master's one-off work on its first request (module imports: ~2 s on a busy 2-core machine).
Run: PYTHONPATH=harness:. python bench/bench_scheduler_overhead.py  (BENCH_SCHED_TRIALS=N)
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
import tempfile
import time
from collections.abc import Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    MasterProcess,
    context_tarball,
    record,
    running_master,
    verdict,
    wait_for_experiment,
)

TRIALS = int(os.environ.get("BENCH_SCHED_TRIALS", "200"))
SLOTS = 2
WORK_S = 1.0
PRESTARTED_ENV = "MASTER_LITE_PRESTARTED_INTERPRETERS"

TRIAL_SCRIPT = f"""
import time
import determined as det
with det.core.init() as core:
    time.sleep({WORK_S!r})
    core.train.report_validation_metrics(steps_completed=1, metrics={{"loss": 1.0}})
"""


@contextlib.contextmanager
def bench_master() -> Iterator[MasterProcess]:
    """`running_master`, passing MASTER_LITE_PRESTARTED_INTERPRETERS through when it is set
    (the fixtures drop MASTER_LITE_* from the master's environment)."""
    prestarted = os.environ.get(PRESTARTED_ENV)
    if prestarted is None:
        with running_master(cpu_slots=SLOTS) as master:
            yield master
        return
    with (
        tempfile.TemporaryDirectory(prefix="bench-master-") as tmp,
        MasterProcess(
            pathlib.Path(tmp) / "root",
            cpu_slots=SLOTS,
            env={"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "3", PRESTARTED_ENV: prestarted},
        ) as master,
    ):
        yield master


def main() -> None:
    config = {
        "name": "bench-scheduler",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_trials": TRIALS,
            "max_length": 1,
            "max_concurrent_trials": 0,
        },
        "hyperparameters": {"x": {"type": "double", "minval": 0, "maxval": 1}},
    }
    with bench_master() as master:
        context = context_tarball({"train.py": TRIAL_SCRIPT})
        start = time.perf_counter()
        exp_id = master.create_experiment(config, context)
        experiment = wait_for_experiment(master, exp_id, timeout=TRIALS * 10)
        elapsed = time.perf_counter() - start
        trials = master.trials(exp_id)
    completed = sum(t["state"] == "COMPLETED" for t in trials)
    if experiment["state"] != "COMPLETED" or completed != TRIALS:
        raise SystemExit(f"experiment {experiment['state']}, {completed}/{TRIALS} trials completed")
    ideal = TRIALS * WORK_S / SLOTS
    ratio = elapsed / ideal
    per_trial = (elapsed - ideal) * SLOTS / TRIALS
    setting = (
        ""
        if os.environ.get(PRESTARTED_ENV) is None
        else f"; {PRESTARTED_ENV}={os.environ[PRESTARTED_ENV]}"
    )
    print(
        f"{TRIALS} trials of {WORK_S:.0f}s on {SLOTS} slots: {elapsed:.1f}s, ideal {ideal:.0f}s, "
        f"ratio {ratio:.3f} ({per_trial * 1000:.0f} ms overhead per trial)"
    )
    record(
        "Scheduler overhead (bench_scheduler_overhead.py)",
        f"Workload: {TRIALS} Core API trials that each sleep {WORK_S:.0f} s and report one "
        f"metric, `random` searcher, {SLOTS} CPU slots; from `POST /experiments` to "
        f"COMPLETED. Single run (it is long and its own average){setting}.\n\n"
        f"| wall time | ideal | ratio | overhead per trial | target |\n|---|---|---|---|---|\n"
        f"| {elapsed:.1f} s | {ideal:.0f} s | {ratio:.3f} | {per_trial * 1000:.0f} ms | "
        f"≤ 1.10: {verdict(ratio, 1.10, at_most=True)} |",
    )


if __name__ == "__main__":
    main()
