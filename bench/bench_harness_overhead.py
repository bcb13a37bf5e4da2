"""Harness overhead: a torch training loop bare vs under the Core API through a running master.

Workload: an MLP (64-128-10) on scikit-learn's digits, batch 32, SGD, 5,000 batches, one torch
thread. "Raw": the loop plus a `torch.save` of model and optimizer state to a local directory
every 500 batches (what a user does without a platform). "Core API": the same loop inside
`det.core.init()` of a real trial of a running master-lite, reporting training metrics (loss)
every 10 batches and saving the same state through `core.checkpoint.store_path` every 500.
Both run in the same trial process, alternating raw/core, REPEATS times each; we report the
median wall time of each and the median of the (raw, core) pairs' ratios.

Ideal: the raw loop's time (ratio 1.00). Target ≤ 1.03.
Run: PYTHONPATH=harness:. python bench/bench_harness_overhead.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (context_tarball, marked_json, median, record, running_master,  # noqa: E402
                     verdict, wait_for_experiment)

BATCHES = int(os.environ.get("BENCH_OVERHEAD_BATCHES", "5000"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))

TRIAL_SCRIPT = r'''
import json, os, pathlib, sys, tempfile, time
import torch
import determined as det
from sklearn.datasets import load_digits

torch.set_num_threads(1)
BATCHES, REPEATS = int(sys.argv[1]), int(sys.argv[2])
digits = load_digits()
X = torch.tensor(digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(digits.target, dtype=torch.long)
batches = [(X[i:i + 32], Y[i:i + 32]) for i in range(0, len(X) - 32, 32)]

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

def raw(save_dir):
    model, opt = make()
    start = time.perf_counter()
    for b in range(1, BATCHES + 1):
        loss = step(model, opt, b)
        if b % 500 == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                       pathlib.Path(save_dir) / f"ckpt-{b}.pt")
    return time.perf_counter() - start

def core_loop(core, offset):
    model, opt = make()
    start = time.perf_counter()
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
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                           pathlib.Path(path) / "state.pt")
            spent["checkpoint"] += time.perf_counter() - t
    return time.perf_counter() - start

spent = {"report": 0.0, "checkpoint": 0.0}

results = {"raw": [], "core": [], "spent": spent}
with det.core.init() as core, tempfile.TemporaryDirectory() as save_dir:
    raw(save_dir)  # warm-up: allocator, kernels, page cache
    for r in range(REPEATS):
        results["raw"].append(raw(save_dir))
        results["core"].append(core_loop(core, r * BATCHES))
    core.train.report_validation_metrics(steps_completed=REPEATS * BATCHES, metrics={"loss": 0.0})
print("BENCH_RESULT " + json.dumps(results), flush=True)
'''


def main() -> None:
    with running_master(cpu_slots=1) as master:
        config = {"name": "bench-harness-overhead", "max_restarts": 0,
                  "entrypoint": f"python3 train.py {BATCHES} {REPEATS}",
                  "searcher": {"name": "single", "metric": "loss", "max_length": 1},
                  "checkpoint_storage": {"save_trial_latest": 100}}
        exp_id = master.create_experiment(config, context_tarball({"train.py": TRIAL_SCRIPT}))
        experiment = wait_for_experiment(master, exp_id, timeout=1800)
        trial = master.trials(exp_id)[0]
        logs = "\n".join(master.logs(trial["id"]))
        found = marked_json(logs, "BENCH_RESULT")
        if experiment["state"] != "COMPLETED" or not found:
            raise SystemExit(f"the benchmark trial failed ({experiment['state']}):\n{logs[-3000:]}")
        stored = len(master.series(trial["id"], "training"))
    results = found[0]
    print("time inside report/checkpoint calls, all core runs:", results["spent"])
    raw, core = median(results["raw"]), median(results["core"])
    # Each core run follows its raw run under the same load: the median of the pairs' ratios
    # is steadier than the ratio of medians when the machine's load swings.
    ratio = median([c / r for r, c in zip(results["raw"], results["core"])])
    expected = REPEATS * BATCHES // 10
    assert stored == expected, f"{stored} of {expected} training reports stored"
    print(f"raw {raw:.3f}s (runs {[round(x, 3) for x in results['raw']]}), core API {core:.3f}s "
          f"(runs {[round(x, 3) for x in results['core']]}), ratio {ratio:.3f}")
    record("Harness overhead (bench_harness_overhead.py)",
           f"Workload: MLP 64-128-10 on digits, batch 32, {BATCHES} batches, 1 torch thread; "
           f"Core API run reports training metrics every 10 batches and checkpoints every 500 "
           f"through a running master (all {expected} reports verified stored); raw run does "
           f"the same `torch.save` every 500. Medians of {REPEATS} alternating runs in one "
           f"trial process; ratio = median of the pairs' ratios. Time inside the Core API "
           f"calls over all runs: reports {results['spent']['report']:.3f} s, checkpoints "
           f"{results['spent']['checkpoint']:.3f} s.\n\n"
           f"| raw loop | under Core API | ratio | target |\n|---|---|---|---|\n"
           f"| {raw:.3f} s | {core:.3f} s | {ratio:.3f} | ≤ 1.03: "
           f"{verdict(ratio, 1.03, at_most=True)} |")


if __name__ == "__main__":
    main()
