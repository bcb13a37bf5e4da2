"""Shared pieces of the benchmarks: the machine description, timing helpers, a running master,
and appending a section to bench/RESULTS.md.

Every benchmark runs its baseline and ours in the same process run (same machine, same load),
repeats each measurement and reports medians, so the ratios stay honest on a busy machine.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
for _path in (str(ROOT / "harness"), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tests._support import (  # noqa: E402
    MasterProcess,
    child_env,
    context_tarball,
    wait_for_experiment,
    wait_until,
)

RESULTS = ROOT / "bench" / "RESULTS.md"


# -- the machine ------------------------------------------------------------------------------
def machine_description() -> str:
    """One line naming CPU, cores, memory, OS, Python, and the load when the run started."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (
        f"{cpu}, {os.cpu_count()} cores, {memory} RAM, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, load average {load}"
    )


def package_version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "not installed"


# -- timing -----------------------------------------------------------------------------------
def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank: a value that was actually observed."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def interleaved(
    measurements: dict[str, Callable[[], float]], repeats: int
) -> dict[str, list[float]]:
    """Run each measurement `repeats` times, alternating them (A B A B ...), so a burst of load
    from elsewhere on the machine hits both sides instead of one."""
    results: dict[str, list[float]] = {name: [] for name in measurements}
    for _ in range(repeats):
        for name, measure in measurements.items():
            results[name].append(measure())
    return results


# -- a running master -------------------------------------------------------------------------
@contextlib.contextmanager
def running_master(
    cpu_slots: int = 2, root_dir: pathlib.Path | None = None, extra_args: list[str] | None = None
) -> Iterator[MasterProcess]:
    """A real `python -m master_lite` on loopback with a fresh (or given) root dir."""
    with contextlib.ExitStack() as stack:
        if root_dir is None:
            root_dir = (
                pathlib.Path(
                    stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-master-"))
                )
                / "root"
            )
        # A short grace: benchmark trials (e.g. `sleep 3600`) never answer a preemption.
        master = stack.enter_context(
            MasterProcess(
                root_dir,
                cpu_slots=cpu_slots,
                extra_args=extra_args,
                env={"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "3"},
            )
        )
        yield master


def cli_env(master: MasterProcess) -> dict[str, str]:
    """Environment for `python -m determined.cli` talking to `master` as the user."""
    return child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token})


def sleeping_trials(master: MasterProcess, count: int) -> tuple[list[int], int]:
    """An experiment of `count` trials that only sleep (`sleep 3600`), so a benchmark can post
    to real trial ids with the user token without trial code competing for the CPU. The master
    needs at least `count` slots. The caller kills the experiment."""
    config = {
        "name": "bench-sleepers",
        "entrypoint": "sleep 3600",
        "searcher": {
            "name": "grid",
            "metric": "loss",
            "max_length": 1,
            "max_concurrent_trials": count,
        },
        "hyperparameters": {"i": {"type": "categorical", "vals": list(range(count))}},
        "max_restarts": 0,
    }
    exp_id = master.create_experiment(config, None)
    return [
        t["id"]
        for t in wait_until(
            lambda: (
                lambda ts: (
                    ts if len(ts) == count and all(t["state"] == "ACTIVE" for t in ts) else None
                )
            )(master.trials(exp_id)),
            120,
            f"{count} sleeping trials",
        )
    ], exp_id


# A trial that reports one metric right after `det.core.init()`: the start benchmarks' workload.
FIRST_METRIC_SCRIPT = """
import determined as det
with det.core.init() as core:
    core.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
    core.train.report_validation_metrics(steps_completed=1, metrics={"loss": 1.0})
"""


def has_first_metric(master: MasterProcess, exp_id: int) -> bool:
    """Whether the experiment's first trial has a metric stored."""
    trials = master.trials(exp_id)
    return bool(
        trials and master.session.get(f"/trials/{trials[0]['id']}/metrics", {"limit": 1})["metrics"]
    )


def submit_to_first_metric(master: MasterProcess, config: dict, context: str) -> float:
    """Seconds from `POST /experiments` of `config` and `context` (a base64 tarball) until its
    trial's first metric is stored, polled every 10 ms; returns once the experiment has ended, so
    the next measurement finds the slot free."""
    start = time.perf_counter()
    answer = master.session.post("/experiments", {"config": config, "context": context})
    exp_id = int(answer["experiment"]["id"])
    while not has_first_metric(master, exp_id):
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    wait_for_experiment(master, exp_id)
    return elapsed


# -- results ----------------------------------------------------------------------------------
def record(section: str, body: str) -> None:
    """Replace (or append) `## <section>` in bench/RESULTS.md, keeping every other section."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    block = f"## {section}\n\n_Run {stamp} on {machine_description()}._\n\n{body.strip()}\n\n"
    text = (
        RESULTS.read_text()
        if RESULTS.exists()
        else (
            "# Benchmark and reliability results\n\n"
            "Each section is written by the benchmark or suite named in its title "
            "(`make bench`, `make soak`); re-running one replaces only its section.\n\n"
        )
    )
    pattern = re.compile(rf"^## {re.escape(section)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    RESULTS.write_text(text)


def verdict(value: float, target: float, *, at_most: bool) -> str:
    ok = value <= target if at_most else value >= target
    return "meets target" if ok else "MISSES target"


def run_python(
    code: str, *, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env or child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def marked_json(text: str, marker: str) -> list[dict]:
    """The JSON objects a child printed as `<marker> {...}` lines."""
    found = []
    for line in text.splitlines():
        _, sep, rest = line.partition(marker + " ")
        if sep:
            found.append(json.loads(rest))
    return found


__all__ = [
    "ROOT",
    "RESULTS",
    "MasterProcess",
    "child_env",
    "cli_env",
    "context_tarball",
    "interleaved",
    "machine_description",
    "marked_json",
    "median",
    "package_version",
    "percentile",
    "record",
    "run_python",
    "running_master",
    "sleeping_trials",
    "timed",
    "verdict",
    "wait_for_experiment",
    "wait_until",
]
