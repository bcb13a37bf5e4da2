"""Trials in Jupyter kernels vs as processes: start (submit -> first metric) and throughput.

Workload: one running master-lite with a free slot. Start: an experiment whose trial reports
one training metric right after `det.core.init()`, submitted through `POST /experiments`, once
as a process (the local runner, pre-started interpreters on) and once with
`environment.kernel: {}` (a python3 kernel started per trial run); the clock runs from the
submission until `GET /trials/{id}/metrics` (polled every 10 ms) shows the metric.
Throughput: a trial runs STEPS steps of a fixed pure-Python/NumPy workload, reporting training
metrics every 100 steps through the Core API, and reports the loop's own wall time as a
validation metric; process and kernel trials alternate, REPEATS times each after one unmeasured
run of each; medians.

Ideal: a kernel costs its start (~1 s: the kernel and its ZMQ channels) and nothing per step
(the program runs as plain Python in the kernel's main thread; output goes over iopub).
Targets: throughput kernel / process <= 1.03; start reported as a ratio (no target).
Run: PYTHONPATH=harness:. python bench/bench_kernel_trials.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import (  # noqa: E402
    FIRST_METRIC_SCRIPT,
    interleaved,
    median,
    record,
    running_master,
    submit_to_first_metric,
    verdict,
)

from tests._support import MasterProcess, context_tarball, wait_for_experiment  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
STEPS = int(os.environ.get("BENCH_KERNEL_STEPS", "3000"))
TARGET_RATIO = 1.03

THROUGHPUT_SCRIPT = """
import os, time
import numpy as np
import determined as det

steps = int(os.environ["BENCH_STEPS"])
rng = np.random.default_rng(0)
w = rng.standard_normal((64, 64))
with det.core.init() as core:
    start = time.perf_counter()
    x = rng.standard_normal((32, 64))
    for step in range(1, steps + 1):
        x = np.tanh(x @ w) + 0.01 * sum(i * 0.5 for i in range(200))
        if step % 100 == 0:
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": float(x.mean())})
    seconds = time.perf_counter() - start
    core.train.report_validation_metrics(steps_completed=steps, metrics={"loss": seconds})
"""


def config(kernel: bool, name: str) -> dict:
    base: dict = {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "environment": {"environment_variables": [f"BENCH_STEPS={STEPS}"]},
    }
    if kernel:
        base["environment"]["kernel"] = {"keep_alive": 0}
    return base


def start_seconds(master: MasterProcess, kernel: bool) -> float:
    context = context_tarball({"train.py": FIRST_METRIC_SCRIPT})
    return submit_to_first_metric(master, config(kernel, "bench-kernel-start"), context)


def submit_throughput(master: MasterProcess, kernel: bool, name: str) -> int:
    """Submit the throughput program (in a kernel or as a process); its experiment id."""
    context = context_tarball({"train.py": THROUGHPUT_SCRIPT})
    body = {"config": config(kernel, name), "context": context}
    return int(master.session.post("/experiments", body)["experiment"]["id"])


def loop_seconds(master: MasterProcess, kernel: bool) -> float:
    return reported_loop_seconds(
        master, submit_throughput(master, kernel, "bench-kernel-throughput")
    )


def reported_loop_seconds(master: MasterProcess, exp_id: int) -> float:
    """Wait for the throughput experiment to end; the loop time its trial reported."""
    state = wait_for_experiment(master, exp_id)["state"]
    if state != "COMPLETED":
        raise RuntimeError(f"experiment {exp_id} ended {state}")
    (trial,) = master.trials(exp_id)
    (report,) = master.session.get(f"/trials/{trial['id']}/metrics", {"group": "validation"})[
        "metrics"
    ]
    return float(report["metrics"]["loss"])


def main() -> None:
    with running_master(cpu_slots=1) as master:
        for kernel in (False, True):
            start_seconds(master, kernel)
            loop_seconds(master, kernel)
        starts = interleaved(
            {
                "process": lambda: start_seconds(master, False),
                "kernel": lambda: start_seconds(master, True),
            },
            REPEATS,
        )
        loops = interleaved(
            {
                "process": lambda: loop_seconds(master, False),
                "kernel": lambda: loop_seconds(master, True),
            },
            REPEATS,
        )
    start_p, start_k = median(starts["process"]), median(starts["kernel"])
    loop_p, loop_k = median(loops["process"]), median(loops["kernel"])
    ratio = loop_k / loop_p
    body = (
        f"| measure (median of {REPEATS}) | process | kernel | kernel / process |\n"
        "|---|---|---|---|\n"
        f"| submit -> first metric | {start_p:.3f} s | {start_k:.3f} s | {start_k / start_p:.2f}x |\n"
        f"| {STEPS} training steps (metrics every 100) | {loop_p:.3f} s | {loop_k:.3f} s | "
        f"{ratio:.3f} |\n\n"
        f"Throughput kernel / process: **{ratio:.3f}** (target <= {TARGET_RATIO}: "
        f"{verdict(ratio, TARGET_RATIO, at_most=True)})."
    )
    print(body)
    record("Kernel trials (bench_kernel_trials.py)", body)


if __name__ == "__main__":
    main()
