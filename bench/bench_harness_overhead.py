"""Harness overhead: a torch training loop bare vs under the Core API through a running master.

Workload: an MLP (64-128-10) on scikit-learn's digits, batch 32, SGD, 5,000 batches, one torch
thread. "Raw": the loop plus a `torch.save` of model and optimizer state to a local directory
every 500 batches (what a user does without a platform). "Core API": the same loop inside
`det.core.init()` of a real trial of a running master-lite, reporting training metrics (loss)
every 10 batches and saving the same state through `core.checkpoint.store_path` every 500.

Method: both run in the same trial process. One raw and one Core API run are discarded as
warm-up (allocator, page cache, the first HTTP connections and threads); then PAIRS pairs, each
a raw and a Core API run back to back, in alternating order (raw first, then Core API first) so
neither side always runs second. The headline ratio is the median of the pairs' ratios (a burst
of load from elsewhere hits both runs of a pair); the spread of the pair ratios is reported with
it. Load-insensitive diagnostics, per run: time spent inside the Core API calls, `torch.save`
inside `store_path` (the raw run pays it too), CPU time of the training thread, of the Core
API's background threads and of the report courier process (which posts the reports), and how
often the training thread blocked (a GIL hand-off to a background thread or a wait on the master
shows up there).

Ideal: the raw loop's time (ratio 1.00). Target ≤ 1.03.
Run: PYTHONPATH=harness:. python bench/bench_harness_overhead.py
     (BENCH_REPEATS=pairs, default 10; BENCH_OVERHEAD_BATCHES for a quick try only)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    context_tarball,
    marked_json,
    median,
    percentile,
    record,
    running_master,
    verdict,
    wait_for_experiment,
)

BATCHES = int(os.environ.get("BENCH_OVERHEAD_BATCHES", "5000"))
PAIRS = int(os.environ.get("BENCH_REPEATS", "10"))

TRIAL_SCRIPT = r'''
import json, os, pathlib, sys, tempfile, threading, time
import torch
import determined as det
from sklearn.datasets import load_digits

torch.set_num_threads(1)
BATCHES, PAIRS = int(sys.argv[1]), int(sys.argv[2])
digits = load_digits()
X = torch.tensor(digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(digits.target, dtype=torch.long)
batches = [(X[i:i + 32], Y[i:i + 32]) for i in range(0, len(X) - 32, 32)]
TICK = os.sysconf("SC_CLK_TCK")
BACKGROUND = ("MetricsShipperThread", "CheckpointReporterThread", "ReportCourierTail",
              "ReportCourierReader")

def stat_cpu(path):
    fields = pathlib.Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK

def make():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    return model, torch.optim.SGD(model.parameters(), lr=0.05)

def step(model, opt, b):
    x, y = batches[b % len(batches)]
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

def background_cpu():
    """CPU seconds used so far by the Core API's background threads (from /proc)."""
    total = 0.0
    for thread in threading.enumerate():
        if thread.name in BACKGROUND and thread.native_id is not None:
            try:
                total += stat_cpu(f"/proc/self/task/{thread.native_id}/stat")
            except OSError:
                continue  # it just ended
    return total

def courier_cpu(core):
    """CPU seconds used so far by the report courier's child process (it posts the reports)."""
    proc = getattr(core.train._shipper, "_proc", None)
    return stat_cpu(f"/proc/{proc.pid}/stat") if proc is not None else 0.0

def blocking_waits():
    """Times the training thread has blocked so far (on the GIL, a socket, a lock...)."""
    status = pathlib.Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text()
    return int(status.split("\nvoluntary_ctxt_switches:")[1].split()[0])

def raw(save_dir, spent):
    model, opt = make()
    waits = blocking_waits()
    cpu, start = time.thread_time(), time.perf_counter()
    for b in range(1, BATCHES + 1):
        loss = step(model, opt, b)
        if b % 500 == 0:
            t = time.perf_counter()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                       pathlib.Path(save_dir) / f"ckpt-{b}.pt")
            spent["torch_save"] += time.perf_counter() - t
    elapsed = time.perf_counter() - start
    spent["thread_cpu"] += time.thread_time() - cpu
    spent["blocking_waits"] += blocking_waits() - waits
    return elapsed

def core_loop(core, offset, spent):
    model, opt = make()
    background, waits, child = background_cpu(), blocking_waits(), courier_cpu(core)
    cpu, start = time.thread_time(), time.perf_counter()
    for b in range(1, BATCHES + 1):
        loss = step(model, opt, b)
        if b % 10 == 0:
            t = time.perf_counter()
            core.train.report_training_metrics(steps_completed=offset + b,
                                               metrics={"loss": loss.item()})
            spent["report"] += time.perf_counter() - t
        if b % 500 == 0:
            t = time.perf_counter()
            with core.checkpoint.store_path({"steps_completed": offset + b}) as (path, _):
                t_save = time.perf_counter()
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                           pathlib.Path(path) / "state.pt")
                spent["torch_save"] += time.perf_counter() - t_save
            spent["checkpoint"] += time.perf_counter() - t
    elapsed = time.perf_counter() - start
    spent["thread_cpu"] += time.thread_time() - cpu
    spent["background_cpu"] += background_cpu() - background
    spent["courier_cpu"] += courier_cpu(core) - child
    spent["blocking_waits"] += blocking_waits() - waits
    return elapsed

def new_spent():
    return {"report": 0.0, "checkpoint": 0.0, "torch_save": 0.0, "thread_cpu": 0.0,
            "background_cpu": 0.0, "courier_cpu": 0.0, "blocking_waits": 0}

results = {"raw": [], "core": [], "raw_spent": new_spent(), "core_spent": new_spent()}
with det.core.init() as core, tempfile.TemporaryDirectory() as save_dir:
    offset = 0
    raw(save_dir, new_spent())  # warm-up runs, discarded
    core_loop(core, offset, new_spent())
    for pair in range(PAIRS):
        offset += BATCHES
        if pair % 2 == 0:
            results["raw"].append(raw(save_dir, results["raw_spent"]))
            results["core"].append(core_loop(core, offset, results["core_spent"]))
        else:
            results["core"].append(core_loop(core, offset, results["core_spent"]))
            results["raw"].append(raw(save_dir, results["raw_spent"]))
    core.train.report_validation_metrics(steps_completed=offset, metrics={"loss": 0.0})
print("BENCH_RESULT " + json.dumps(results), flush=True)
'''


def per_run_ms(spent: dict, runs: int) -> dict:
    return {key: 1000 * value / runs for key, value in spent.items()}


def main() -> None:
    with running_master(cpu_slots=1) as master:
        config = {
            "name": "bench-harness-overhead",
            "max_restarts": 0,
            "entrypoint": f"python3 train.py {BATCHES} {PAIRS}",
            "searcher": {"name": "single", "metric": "loss", "max_length": 1},
            "checkpoint_storage": {"save_trial_latest": 100},
        }
        exp_id = master.create_experiment(config, context_tarball({"train.py": TRIAL_SCRIPT}))
        experiment = wait_for_experiment(master, exp_id, timeout=1800)
        trial = master.trials(exp_id)[0]
        logs = "\n".join(master.logs(trial["id"]))
        found = marked_json(logs, "BENCH_RESULT")
        if experiment["state"] != "COMPLETED" or not found:
            raise SystemExit(f"the benchmark trial failed ({experiment['state']}):\n{logs[-3000:]}")
        stored = len(master.series(trial["id"], "training"))
        # Every reported checkpoint keeps its row (GC after the end only marks it DELETED).
        checkpoints = len(
            master.db_rows("SELECT uuid FROM checkpoints WHERE trial_id = ?", (trial["id"],))
        )
    results = found[0]
    raw_runs, core_runs = results["raw"], results["core"]
    raw, core = median(raw_runs), median(core_runs)
    # Each pair ran back to back under the same load: the median of the pairs' ratios is
    # steadier than the ratio of medians when the machine's load swings.
    ratios = [c / r for r, c in zip(raw_runs, core_runs, strict=True)]
    ratio = median(ratios)
    spread = (
        f"pair ratios: min {min(ratios):.3f}, quartiles {percentile(ratios, 25):.3f} / "
        f"{percentile(ratios, 75):.3f}, max {max(ratios):.3f}"
    )
    # The warm-up core run reports and checkpoints too.
    expected_reports = (PAIRS + 1) * (BATCHES // 10)
    expected_checkpoints = (PAIRS + 1) * (BATCHES // 500)
    assert stored == expected_reports, f"{stored} of {expected_reports} training reports stored"
    assert checkpoints == expected_checkpoints, (
        f"{checkpoints} of {expected_checkpoints} checkpoints reported"
    )
    raw_ms = per_run_ms(results["raw_spent"], PAIRS)
    core_ms = per_run_ms(results["core_spent"], PAIRS)
    cpu_ratio = core_ms["thread_cpu"] / raw_ms["thread_cpu"]
    diagnostics = (
        f"per Core API run: {core_ms['report']:.1f} ms in report_training_metrics "
        f"({BATCHES // 10} calls), {core_ms['checkpoint']:.1f} ms in store_path "
        f"({BATCHES // 500} checkpoints) of which torch.save {core_ms['torch_save']:.1f} ms "
        f"(raw run's torch.save: {raw_ms['torch_save']:.1f} ms); training-thread CPU "
        f"{core_ms['thread_cpu']:.0f} ms vs raw {raw_ms['thread_cpu']:.0f} ms "
        f"(ratio {cpu_ratio:.3f}); background threads' CPU {core_ms['background_cpu']:.0f} ms, "
        f"the report courier process's {core_ms['courier_cpu']:.0f} ms; "
        f"the training thread blocked {results['core_spent']['blocking_waits'] / PAIRS:.0f} "
        f"times vs raw {results['raw_spent']['blocking_waits'] / PAIRS:.0f} (voluntary "
        f"context switches: GIL hand-offs, socket waits)"
    )
    print(f"raw {raw:.3f}s (runs {[round(x, 3) for x in raw_runs]})")
    print(f"core API {core:.3f}s (runs {[round(x, 3) for x in core_runs]})")
    print(f"ratio {ratio:.3f} ({spread}); ratio of medians {core / raw:.3f}")
    print(diagnostics)
    record(
        "Harness overhead (bench_harness_overhead.py)",
        f"Workload: MLP 64-128-10 on digits, batch 32, {BATCHES} batches, 1 torch thread; "
        f"Core API run reports training metrics every 10 batches and checkpoints every 500 "
        f"through a running master (all {expected_reports} reports and "
        f"{expected_checkpoints} checkpoints verified stored); raw run does the same "
        f"`torch.save` every 500. One warm-up run of each discarded, then {PAIRS} pairs "
        f"in one trial process, alternating which side runs first; ratio = median of the "
        f"pairs' ratios ({spread}). Load-insensitive diagnostics, {diagnostics}.\n\n"
        f"| raw loop | under Core API | ratio | target |\n|---|---|---|---|\n"
        f"| {raw:.3f} s | {core:.3f} s | {ratio:.3f} | ≤ 1.03: "
        f"{verdict(ratio, 1.03, at_most=True)} |",
    )


if __name__ == "__main__":
    main()
