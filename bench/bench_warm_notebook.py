"""First metric of the shipped torch notebook: a cold kernel vs a warm one (issue 28 row 8).

Workload: `notebooks/pytorch_trial.ipynb` exported as `%%det_submit` / `det.experimental.create`
export it (all its cells, `_det_notebook_cell.py`) with the notebook's own config (a
`PyTorchTrial`, an MLP on digits, first training metric after 10 batches), submitted through
`POST /experiments` as a kernel trial (`environment.kernel`, as a Jupyter server submits a
notebook's trials). The clock runs from the submission until `GET /trials/{id}/metrics`
(polled every 10 ms) shows the first metric.

* cold: a master with warm kernels off (`MASTER_LITE_WARM_KERNEL_IDLE_S=0`): each trial's
  kernel starts then, and the notebook imports torch, sklearn and (lazily, in `torch.optim`)
  torch._dynamo: ~97% of the time to the first metric (cProfile of the trial);
* warm: a master with warm kernels on (the default): one unmeasured trial first (it teaches
  the master the notebook's modules), then each measured trial comes THINK_S seconds after the
  previous one ended (a person reading the result and re-running the cell), when the kernel
  started ahead has imported them.

Cold and warm alternate, REPEATS times each; medians. Target: warm <= 3 s (the issue's
"starts training in <= 3 s on this machine"); the ratio cold / warm is reported.
Run: PYTHONPATH=harness:. python bench/bench_warm_notebook.py
"""

from __future__ import annotations

import ast
import contextlib
import os
import pathlib
import sys
import tempfile
import time
from collections.abc import Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import ROOT, interleaved, median, record, submit_to_first_metric, verdict  # noqa: E402

from jupyter_determined.kernel._export import export_notebook_script  # noqa: E402
from jupyter_determined.kernel._submission import SCRIPT_NAME, build_config  # noqa: E402
from master_lite.runners.kernel._warm import WARM_ENV  # noqa: E402
from tests._support import MasterProcess, context_tarball  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
THINK_S = float(os.environ.get("BENCH_WARM_THINK_S", "20"))
TARGET_S = 3.0
NOTEBOOK = ROOT / "notebooks" / "pytorch_trial.ipynb"


def notebook_config(script: str) -> dict:
    """The `config = {...}` the notebook's last cell assigns."""
    for node in ast.walk(ast.parse(script)):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
            "config"
        ]:
            return ast.literal_eval(node.value)
    raise RuntimeError(f"{NOTEBOOK}: no `config = {{...}}` cell")


@contextlib.contextmanager
def master(warm: bool) -> Iterator[MasterProcess]:
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        env = {"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "3", WARM_ENV: "600" if warm else "0"}
        with MasterProcess(pathlib.Path(tmp) / "root", cpu_slots=1, env=env) as running:
            yield running


def training_losses(on: MasterProcess, exp_id: int) -> list[float]:
    """The training losses the experiment's trial reported, in order."""
    (trial,) = on.trials(exp_id)
    reports = on.session.get(f"/trials/{trial['id']}/metrics", {"group": "training"})["metrics"]
    return [float(report["metrics"]["loss"]) for report in reports]


def main() -> None:
    script = export_notebook_script(NOTEBOOK).script
    config = build_config(notebook_config(script), name=None, notebook_path=str(NOTEBOOK))
    config["environment"] = {"kernel": {"keep_alive": 0}}
    # One seed for every run: a warm trial must train exactly as a cold one (checked below).
    config["reproducibility"] = {"experiment_seed": 1}
    context = context_tarball({SCRIPT_NAME: script})

    def first_metric(on: MasterProcess, think: float) -> float:
        time.sleep(think)  # the person between two runs of the cell (the warm kernel's time)
        return submit_to_first_metric(on, config, context)

    with master(False) as cold, master(True) as warm:
        first_metric(warm, 0)  # the master learns the notebook's modules
        runs = interleaved(
            {"cold": lambda: first_metric(cold, 0), "warm": lambda: first_metric(warm, THINK_S)},
            REPEATS,
        )
        logs = "\n".join(warm.logs(warm.trials(2)[0]["id"]) if warm.trials(2) else [])
        losses = {  # the warm master's experiment 1 was the unmeasured first run
            "cold": [training_losses(cold, n) for n in range(1, REPEATS + 1)],
            "warm": [training_losses(warm, n) for n in range(2, REPEATS + 2)],
        }
    same = all(values == losses["cold"][0] for values in losses["cold"] + losses["warm"])
    cold_s, warm_s = median(runs["cold"]), median(runs["warm"])
    body = (
        f"`notebooks/pytorch_trial.ipynb` (PyTorchTrial, first training metric after 10 "
        f"batches) as a kernel trial; submit -> first metric stored, median of {REPEATS}, "
        f"cold and warm alternating (warm: the next run {THINK_S:g} s after the previous "
        "ended).\n\n"
        "| path | first metric (median) | runs |\n|---|---|---|\n"
        f"| cold kernel (warm kernels off) | {cold_s:.2f} s | "
        f"{', '.join(f'{v:.2f}' for v in runs['cold'])} |\n"
        f"| warm kernel (the notebook's modules imported ahead) | {warm_s:.2f} s | "
        f"{', '.join(f'{v:.2f}' for v in runs['warm'])} |\n\n"
        f"Cold / warm: **{cold_s / warm_s:.1f}x**. Warm first metric {warm_s:.2f} s (target <= "
        f"{TARGET_S:g} s: {verdict(warm_s, TARGET_S, at_most=True)})."
    )
    body += (
        "\n\n"
        "Where a cold run's time goes (measured once, issue 28 row 8): the kernel start "
        "(0.7-2.1 s), then imports, ~97% of the trial's own time in a cProfile of it (of "
        "10.4 s under the profiler: torch 3.4 s, sklearn/SciPy 2.8 s, torch._dynamo 2.9 "
        "s, which `torch.optim` imports on the first optimizer); loading digits and the "
        "10 batches take milliseconds. A warm kernel has those imports done."
    )
    body += (
        f"\n\nSame results: the training losses of every cold and warm run (one experiment "
        f"seed) are {'identical' if same else 'NOT identical: ' + repr(losses)}."
    )
    if "warm: " not in logs:
        body += "\n\nNOTE: the warm runs did not report a warm kernel: " + logs[:500]
    print(body)
    record("Warm kernels: first metric of the torch notebook (bench_warm_notebook.py)", body)


if __name__ == "__main__":
    main()
