"""Attaching to a running kernel trial does not slow its training: throughput with and without.

Workload: one running master-lite with a free slot, and bench_kernel_trials' throughput program
(STEPS steps of a fixed pure-Python/NumPy workload, training metrics every 100 steps, the loop's
own wall time reported as a validation metric) in a kernel trial, run alternately
  * alone, and
  * with a client attached the whole time (`determined.cli.attach_trial`, the code path of
    `det trial attach` and `%det attach`): as soon as the trial's kernel is up it reads the
    script's live global `step` through an ipykernel subshell once a second (a person typing
    into an attached console) until the trial ends.
REPEATS runs of each after one unmeasured run of each; medians.

Ideal: the same loop time (the subshell runs in its own thread; a read costs the kernel a few
milliseconds of IPython under the GIL, each message passing between its threads). Reading ten
times a second instead costs ~10% here (2 cores), which is why the rate is a person's.
Target: attached / alone <= 1.03 (noise).
Run: PYTHONPATH=harness:. python bench/bench_kernel_attach.py
"""

from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Longer runs than bench_kernel_trials' default (~6 s), so that each has several reads (the
# variable is read by bench_kernel_trials at its import).
STEPS = os.environ.setdefault("BENCH_KERNEL_STEPS", "300000")
from _common import interleaved, median, record, running_master, verdict  # noqa: E402
from bench_kernel_trials import reported_loop_seconds, submit_throughput  # noqa: E402

from determined.cli import attach_trial  # noqa: E402
from determined.cli._base import CliError  # noqa: E402
from determined.common import api  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
TARGET_RATIO = 1.03
READ_EVERY_S = 1.0


def _attach_and_read(master, exp_id: int, done: threading.Event, reads: list[int]) -> None:  # type: ignore[no-untyped-def]
    """Read `step` from the trial's kernel every READ_EVERY_S until `done`."""
    session = api.Session(master.url, master.token)
    kernel = None
    while kernel is None and not done.is_set():
        trials = master.trials(exp_id)
        try:
            if trials:
                kernel = attach_trial(session, int(trials[0]["id"]))
        except Exception:  # noqa: BLE001 - the kernel is not up yet: look again
            kernel = None
        if kernel is None:
            done.wait(0.02)
    if kernel is None:
        return
    try:
        while not done.is_set():
            out: list[str] = []
            try:
                ok = kernel.run("step", write=out.append)
            except CliError:  # the trial ended meanwhile
                return
            if ok and "".join(out).strip().isdigit():
                reads.append(int("".join(out)))
            done.wait(READ_EVERY_S)
    finally:
        kernel.close()


def loop_seconds(master, attached: bool, reads: list[int] | None = None) -> float:  # type: ignore[no-untyped-def]
    exp_id = submit_throughput(master, True, "bench-kernel-attach")
    if not attached:
        return reported_loop_seconds(master, exp_id)
    done = threading.Event()
    seen: list[int] = [] if reads is None else reads
    reader = threading.Thread(target=_attach_and_read, args=(master, exp_id, done, seen))
    reader.start()
    try:
        return reported_loop_seconds(master, exp_id)
    finally:
        done.set()
        reader.join()


def main() -> None:
    reads: list[int] = []
    with running_master(cpu_slots=1) as master:
        loop_seconds(master, False)
        loop_seconds(master, True)
        loops = interleaved(
            {
                "alone": lambda: loop_seconds(master, False),
                "attached": lambda: loop_seconds(master, True, reads),
            },
            REPEATS,
        )
    if not reads:
        raise RuntimeError("the attached client never read `step`: nothing was measured")
    alone, attached = median(loops["alone"]), median(loops["attached"])
    ratio = attached / alone
    body = (
        f"| measure (median of {REPEATS}) | alone | attached | attached / alone |\n"
        "|---|---|---|---|\n"
        f"| {STEPS} training steps in a kernel trial | {alone:.3f} s | {attached:.3f} s | "
        f"{ratio:.3f} |\n\n"
        f"The attached client read `step` {len(reads)} times in all ({len(reads) / REPEATS:.0f} "
        f"a run, every {READ_EVERY_S} s).\n"
        f"Throughput attached / alone: **{ratio:.3f}** (target <= {TARGET_RATIO}: "
        f"{verdict(ratio, TARGET_RATIO, at_most=True)})."
    )
    print(body)
    record("Attach to a running kernel trial (bench_kernel_attach.py)", body)


if __name__ == "__main__":
    main()
