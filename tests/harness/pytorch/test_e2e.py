"""PyTorchTrial end to end: a real master-lite subprocess, `det e create`, real trial processes.

* random search of 3 trials of examples/pytorch_digits (`entrypoint: model_def:DigitsTrial`);
* adaptive ASHA driven by the master's searcher operations (promotions re-start trials);
* pause + activate resumes from the preemption checkpoint with exactly the metrics of an
  uninterrupted run of the same experiment seed.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from determined.common.api import Session
from tests._support import (
    TERMINAL_EXPERIMENT_STATES,
    MasterProcess,
    child_env,
    trials,
    wait_for_experiment,
    wait_until,
)

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "pytorch_digits"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("pytorch-e2e-master")) as process:
        process.session.cli_env = child_env(  # type: ignore[attr-defined]
            {"OMP_NUM_THREADS": "1", "DET_MASTER": process.url, "DET_MASTER_TOKEN": process.token}
        )
        yield process.session


def det_create(master: Session, config_text: str, context: pathlib.Path) -> int:
    (context / "exp.yaml").write_text(config_text)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "determined.cli",
            "e",
            "create",
            str(context / "exp.yaml"),
            str(context),
        ],
        env=master.cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return int(result.stdout.strip().split()[-1])


def det_action(master: Session, action: str, exp_id: int) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "determined.cli", "e", action, str(exp_id)],
        env=master.cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def context(tmp_path: pathlib.Path) -> pathlib.Path:
    work = tmp_path / "context"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    # A deliberately slow variant, so a pause lands in the middle of training.
    (work / "slow_def.py").write_text(
        "import time\nfrom model_def import DigitsTrial\n\n\n"
        "class SlowDigitsTrial(DigitsTrial):\n"
        "    def train_batch(self, batch, epoch_idx, batch_idx):\n"
        "        time.sleep(0.01)\n"
        "        return super().train_batch(batch, epoch_idx, batch_idx)\n"
    )
    return work


def logs(master: Session, exp_id: int) -> str:
    lines = []
    for trial in trials(master, exp_id):
        lines += [entry["line"] for entry in master.get(f"/trials/{trial['id']}/logs")["logs"]]
    return "\n".join(lines)


def series(master: Session, trial_id: int, group: str) -> list[tuple[int, dict]]:
    reports = master.get(f"/trials/{trial_id}/metrics", {"group": group})["metrics"]
    return [(r["steps_completed"], r["metrics"]) for r in reports]


def test_random_search_of_three_trials(master, context):
    config = (EXAMPLE / "random.yaml").read_text() + "reproducibility:\n  experiment_seed: 7\n"
    exp_id = det_create(master, config, context)
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300)
    assert experiment["state"] == "COMPLETED", logs(master, exp_id)[-4000:]
    found = trials(master, exp_id)
    assert len(found) == 3 and {t["state"] for t in found} == {"COMPLETED"}
    assert len({json.dumps(t["hparams"], sort_keys=True) for t in found}) == 3
    for trial in found:
        assert [s for s, _ in series(master, trial["id"], "validation")] == [50, 100, 150]
        assert [s for s, _ in series(master, trial["id"], "training")] == [50, 100, 150]
        assert trial["steps_completed"] == 150
        assert trial["progress"] == pytest.approx(1.0)
    checkpoints = master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    final = [c for c in checkpoints if c["steps_completed"] == 150]
    assert len(final) == 3
    for checkpoint in final:
        assert checkpoint["metadata"]["format"] == "pickle"
        assert {"state_dict.pth", "trial_state.pkl", "load_data.json", "metadata.json"} <= set(
            checkpoint["resources"]
        )
    assert experiment["best_validation"] == pytest.approx(
        min(m["validation_loss"] for t in found for _, m in series(master, t["id"], "validation"))
    )


def test_adaptive_asha_trains_promoted_trials_to_longer_ops(master, context):
    config = """
name: pytorch-digits-asha
entrypoint: model_def:DigitsTrial
hyperparameters:
  global_batch_size: 32
  hidden_size: 32
  dropout: 0.0
  learning_rate:
    type: log
    base: 10
    minval: -3
    maxval: -0.5
searcher:
  name: adaptive_asha
  metric: validation_loss
  smaller_is_better: true
  max_trials: 4
  divisor: 2
  max_rungs: 2
  mode: aggressive
  max_length:
    batches: 80
scheduling_unit: 20
max_restarts: 0
reproducibility:
  experiment_seed: 3
"""
    exp_id = det_create(master, config, context)
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=400)
    assert experiment["state"] == "COMPLETED", logs(master, exp_id)[-4000:]
    found = trials(master, exp_id)
    assert len(found) == 4
    validated = {t["id"]: [s for s, _ in series(master, t["id"], "validation")] for t in found}
    # Rung targets with 2 rungs and divisor 2: 40 then 80 batches; every trial validates at 40,
    # only promoted ones continue (from their rung-0 checkpoint) to 80.
    assert all(steps[0] == 40 for steps in validated.values()), validated
    promoted = [tid for tid, steps in validated.items() if steps == [40, 80]]
    assert promoted, validated
    assert all(steps in ([40], [40, 80]) for steps in validated.values()), validated


def test_pause_and_activate_resumes_exactly(master, context):
    config = (EXAMPLE / "const.yaml").read_text()
    config = config.replace("model_def:DigitsTrial", "slow_def:SlowDigitsTrial")
    config = config.replace("batches: 200", "batches: 400").replace(
        "scheduling_unit: 50", "scheduling_unit: 10"
    )
    config += "reproducibility:\n  experiment_seed: 11\n"

    reference = det_create(master, config, context)
    assert wait_for_experiment(master, reference, timeout=300)["state"] == "COMPLETED", logs(
        master, reference
    )

    paused = det_create(master, config, context)
    (trial,) = wait_until(
        lambda: _trained(master, paused, min_steps=60),
        120,
        f"experiment {paused} to train 60 batches",
        details=lambda: logs(master, paused)[-4000:],
    )
    det_action(master, "pause", paused)
    wait_for_experiment(master, paused, {"PAUSED"})
    wait_until(
        lambda: master.get(f"/trials/{trial['id']}")["trial"]["allocation_id"] is None,
        60,
        "the paused trial to exit",
        0.5,
    )
    stopped_at = master.get(f"/trials/{trial['id']}")["trial"]["steps_completed"]
    det_action(master, "activate", paused)
    assert wait_for_experiment(master, paused, timeout=300)["state"] == "COMPLETED", logs(
        master, paused
    )

    (ref_trial,) = trials(master, reference)
    (resumed,) = trials(master, paused)
    assert resumed["run_id"] >= 2, "the trial was not restarted"
    assert 0 < stopped_at < 400, f"the pause did not interrupt training (stopped at {stopped_at})"
    assert "resumed from checkpoint" in logs(master, paused)
    assert series(master, resumed["id"], "training") == series(master, ref_trial["id"], "training")
    assert series(master, resumed["id"], "validation") == series(
        master, ref_trial["id"], "validation"
    )


def _trained(master: Session, exp_id: int, min_steps: int) -> list[dict] | None:
    """The trials, once the first one reported `min_steps` batches of training."""
    found = trials(master, exp_id)
    if found and (found[0].get("latest_training") or {}).get("steps_completed", 0) >= min_steps:
        return found
    return None


@pytest.mark.rendezvous_ports
def test_two_slot_trial_runs_under_torch_distributed(master, context):
    config = (EXAMPLE / "const.yaml").read_text()
    config = config.replace("batches: 200", "batches: 40").replace("batches: 100", "batches: 20")
    config += "resources:\n  slots_per_trial: 2\n"
    exp_id = det_create(master, config, context)
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300)
    text = logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", text[-4000:]
    assert "determined.launch.torch_distributed" in text
    assert "on slots [0, 1]" in text
    (trial,) = trials(master, exp_id)
    assert [s for s, _ in series(master, trial["id"], "validation")] == [20, 40]
    # Both ranks ran (the master keeps wrap_rank's prefix as each line's rank); only the chief reports.
    entries = master.get(f"/trials/{trial['id']}/logs")["logs"]
    rank1 = [e["line"] for e in entries if e["rank"] == 1]
    assert any("checkpoint" in line for line in rank1), text[-4000:]
    assert not any("report_validation" in line for line in rank1)
    assert any("report_validation" in e["line"] for e in entries if e["rank"] == 0)
