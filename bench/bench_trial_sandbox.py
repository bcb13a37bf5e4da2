"""What the trial sandbox (issue 26 row 6) adds to a process trial's start.

Workload, two measurements, each against its baseline in the same run:
1. The bare start: `true` run through the sandbox's trampoline (user, mount and PID namespaces,
   the master's secrets covered, a fresh /proc) vs `true` run directly; REPEATS_EXEC times
   each, alternating; medians.
2. End to end: two real masters (1 slot each), one with the sandbox on (the default), one with
   MASTER_LITE_TRIAL_SANDBOX=0; a trial that reports one metric right after
   `det.core.init()`, from `POST /experiments` until `GET /trials/{id}/metrics` shows it,
   alternating, REPEATS times each after one unmeasured run of each; medians. Once with
   pre-started interpreters on (they start sandboxed too, ahead of the launch) and once with
   them off (MASTER_LITE_PRESTARTED_INTERPRETERS=0: every trial pays the sandbox's start).

Target: the sandbox adds < 0.1 s to a trial's start (end to end).
Run: PYTHONPATH=harness:. python bench/bench_trial_sandbox.py  (Linux with user namespaces)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import (  # noqa: E402
    FIRST_METRIC_SCRIPT,
    interleaved,
    median,
    record,
    submit_to_first_metric,
    verdict,
)

from master_lite.runners.process._sandbox import SANDBOX_ENV, sandbox_argv  # noqa: E402
from tests._support import MasterProcess, context_tarball  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "10"))
REPEATS_EXEC = int(os.environ.get("BENCH_REPEATS_EXEC", "30"))
TARGET_EXTRA_S = 0.1
CONTEXT = context_tarball({"train.py": FIRST_METRIC_SCRIPT})
CONFIG = {
    "name": "bench-trial-sandbox",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


def exec_seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - start


def main() -> None:
    probe = subprocess.run([*sandbox_argv(())[:-1], "--probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        sys.exit(f"this machine cannot sandbox trials: {probe.stderr.strip()}")
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as scratch:
        hidden = [Path(scratch) / "private", Path(scratch) / "master.db"]
        hidden[0].mkdir()
        hidden[1].write_text("")
        bare = interleaved(
            {
                "direct": lambda: exec_seconds(["true"]),
                "sandboxed": lambda: exec_seconds([*sandbox_argv(hidden), "true"]),
            },
            REPEATS_EXEC,
        )
        runs = {}
        for spares in ("2", "0"):
            base = {"MASTER_LITE_PRESTARTED_INTERPRETERS": spares}
            with (
                MasterProcess(Path(scratch) / f"on{spares}", cpu_slots=1, env=base) as on,
                MasterProcess(
                    Path(scratch) / f"off{spares}", cpu_slots=1, env={**base, SANDBOX_ENV: "0"}
                ) as off,
            ):
                for master in (on, off):
                    submit_to_first_metric(master, CONFIG, CONTEXT)
                runs[spares] = interleaved(
                    {
                        "off": lambda: submit_to_first_metric(off, CONFIG, CONTEXT),
                        "on": lambda: submit_to_first_metric(on, CONFIG, CONTEXT),
                    },
                    REPEATS,
                )
    direct, sandboxed = median(bare["direct"]), median(bare["sandboxed"])
    rows = []
    extras = {}
    for spares, label in (("2", "pre-started interpreters on"), ("0", "pre-started off")):
        plain, boxed = median(runs[spares]["off"]), median(runs[spares]["on"])
        extras[spares] = boxed - plain
        rows.append(
            f"| trial, {label}: submit -> first metric (median of {REPEATS}) | {plain:.3f} s | "
            f"{boxed:.3f} s | {(boxed - plain) * 1000:.0f} ms |"
        )
    worst = max(extras.values())
    body = (
        f"| start | without the sandbox | sandboxed | added |\n|---|---|---|---|\n"
        f"| `true` (median of {REPEATS_EXEC}) | {direct * 1000:.1f} ms | "
        f"{sandboxed * 1000:.1f} ms | {(sandboxed - direct) * 1000:.1f} ms |\n"
        + "\n".join(rows)
        + f"\n\nThe sandbox adds at most {worst * 1000:.0f} ms to a trial's start (target < "
        f"{TARGET_EXTRA_S * 1000:.0f} ms: {verdict(worst, TARGET_EXTRA_S, at_most=True)})."
    )
    print(body)
    record("Trial sandbox start-up (bench_trial_sandbox.py)", body)


if __name__ == "__main__":
    main()
