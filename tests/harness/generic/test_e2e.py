"""The Generic API walkthrough (examples/generic_api) on a real master-lite."""

import pathlib

import pytest

from tests._support import (
    TERMINAL_EXPERIMENT_STATES,
    context_tarball,
    directory_files,
    trials,
    wait_for_experiment,
)
from tests.harness.core.test_e2e import checkpoints, master, series, trial_logs  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[3]
WALKTHROUGH = ROOT / "examples" / "generic_api"

pytestmark = pytest.mark.slow


def test_generic_walkthrough_single_trial(master):  # noqa: F811 (the fixture imported above)
    body = {
        "config": (WALKTHROUGH / "const.yaml").read_text(),
        "context": context_tarball(directory_files(WALKTHROUGH)),
    }
    exp_id = master.post("/experiments", body)["experiment"]["id"]
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=280)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    (trial,) = trials(master, exp_id)
    batches_per_epoch = 23  # ceil(1437 training digits / 64)
    steps = [s for s, _ in series(master, trial["id"], "training")]
    assert steps == [batches_per_epoch * e for e in range(1, 6)]
    ((val_step, val_metrics),) = series(master, trial["id"], "validation")
    assert val_step == 5 * batches_per_epoch
    assert set(val_metrics) == {"validation_loss", "accuracy"}
    assert val_metrics["accuracy"] > 0.5  # 5 epochs of SGD on digits learn something
    saved = checkpoints(master, exp_id)
    assert [c["steps_completed"] for c in saved] == steps
    # checkpoint GC (save_trial_latest/best: 1 by default) keeps the last one's files
    assert saved[-1]["state"] == "COMPLETED"
    assert set(saved[-1]["resources"]) == {"state.pt", "metadata.json"}
    assert (pathlib.Path(saved[-1]["path"]) / "state.pt").exists()
    assert trial["progress"] == pytest.approx(1.0)
