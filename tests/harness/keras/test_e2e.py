"""The Keras Native API end to end: `python train.py` submits itself to a real master-lite.

* a random search of 3 trials re-executes examples/keras_native/train.py in each trial (through
  `python3 -m determined.exec.native`); every trial reaches validation accuracy > 0.9;
* pausing a trial and activating it resumes from its checkpoint at the same step with the same
  optimizer state: its training losses equal those of an uninterrupted experiment with the same seed.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from determined.common.api import Session
from tests._support import (
    TERMINAL_EXPERIMENT_STATES,
    MasterProcess,
    child_env,
    wait_for_experiment,
    wait_until,
)

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "keras_native"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("keras-e2e-master")) as process:
        process.session.info = {"url": process.url, "token": process.token}  # type: ignore[attr-defined]
        yield process.session


def _submit(master: Session, *args: str) -> int:
    env = child_env({"DET_MASTER": master.info["url"], "DET_MASTER_TOKEN": master.info["token"]})
    done = subprocess.run(
        [sys.executable, "train.py", *args],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "Exiting the program after submitting the experiment." in lines
    created = [line for line in lines if line.startswith("Created experiment ")]
    assert created, done.stdout
    return int(created[0].split()[-1])


def _logs(master: Session, trial_id: int) -> str:
    return "\n".join(line["line"] for line in master.get(f"/trials/{trial_id}/logs")["logs"])


def _training_losses(master: Session, trial_id: int) -> dict[int, float]:
    reports = master.get(f"/trials/{trial_id}/metrics", {"group": "training"})["metrics"]
    return {r["steps_completed"]: r["metrics"]["loss"] for r in reports}


def test_random_search_of_the_native_script(master):
    exp_id = _submit(
        master, "--seed", "2718"
    )  # a fixed seed: the sampled hparams and weights repeat
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    trials = answer["trials"]
    assert answer["experiment"]["state"] == "COMPLETED", [_logs(master, t["id"]) for t in trials]
    assert len(trials) == 3
    assert (
        len(
            {t["hparams"]["hidden"] for t in trials}
            | {t["hparams"]["learning_rate"] for t in trials}
        )
        > 2
    )
    for trial in trials:
        assert trial["state"] == "COMPLETED"
        assert trial["steps_completed"] == 400
        assert trial["latest_validation"]["metrics"]["val_accuracy"] > 0.9
        assert "determined.exec.native" in _logs(master, trial["id"])
    checkpoints = master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert checkpoints and all(c["metadata"]["format"] == "keras" for c in checkpoints)
    assert all("model.keras" in c["resources"] for c in checkpoints)


def test_pause_and_activate_resumes_with_identical_optimizer_state(master):
    args = ("--searcher", "single", "--max-batches", "600", "--seed", "4242")
    paused_id = _submit(master, *args)

    def reported_100() -> bool:
        trials = master.get(f"/experiments/{paused_id}/trials")["trials"]
        latest = trials[0].get("latest_training") if trials else None
        return bool(latest and latest["steps_completed"] >= 100)

    wait_until(reported_100, 180, "the trial to report 100 batches")
    master.post(f"/experiments/{paused_id}/pause")
    paused = wait_for_experiment(
        master, paused_id, {"PAUSED"} | TERMINAL_EXPERIMENT_STATES, timeout=120, full=True
    )
    assert paused["experiment"]["state"] == "PAUSED"
    # The experiment is PAUSED at once; its trial checkpoints at the next chunk end and exits.
    trial_id = paused["trials"][0]["id"]

    def trial_paused() -> dict | None:
        trial = master.get(f"/trials/{trial_id}")["trial"]
        return trial if trial["state"] == "PAUSED" and trial["allocation_id"] is None else None

    trial = wait_until(
        trial_paused, 120, "the trial to stop", 0.3, details=lambda: _logs(master, trial_id)
    )
    paused_at = trial["steps_completed"]
    assert 100 <= paused_at < 600, trial
    checkpoint = trial["latest_checkpoint"]
    assert checkpoint, _logs(master, trial["id"])
    master.post(f"/experiments/{paused_id}/activate")
    resumed = wait_for_experiment(
        master, paused_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True
    )
    assert resumed["experiment"]["state"] == "COMPLETED"
    trial = resumed["trials"][0]
    assert trial["run_id"] >= 2 and trial["steps_completed"] == 600
    assert f"resumed from checkpoint {checkpoint} at step {paused_at}" in _logs(master, trial["id"])

    straight_id = _submit(master, *args)
    straight = wait_for_experiment(
        master, straight_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True
    )
    assert straight["experiment"]["state"] == "COMPLETED"
    assert straight["trials"][0]["seed"] == trial["seed"]
    interrupted_losses = _training_losses(master, trial["id"])
    straight_losses = _training_losses(master, straight["trials"][0]["id"])
    assert sorted(straight_losses) == list(range(50, 601, 50))
    assert sorted(interrupted_losses) == sorted(straight_losses)
    assert interrupted_losses == pytest.approx(straight_losses, rel=1e-5)
    # The losses after the pause prove the optimizer state came back (Adam's moments and step).
    after = [s for s in straight_losses if s > paused_at]
    assert after and all(
        interrupted_losses[s] == pytest.approx(straight_losses[s], rel=1e-5) for s in after
    )


def test_test_mode_submits_an_archived_one_batch_experiment(master):
    env = child_env({"DET_MASTER": master.info["url"], "DET_MASTER_TOKEN": master.info["token"]})
    done = subprocess.run(
        [sys.executable, "train.py", "--test"],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    exp_id = int(done.stdout.split("Created test experiment ")[1].split()[0])
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    assert answer["experiment"]["state"] == "COMPLETED"
    assert answer["experiment"]["archived"] is True
    assert answer["experiment"]["description"].startswith("[test-mode] ")
    (trial,) = answer["trials"]
    assert trial["steps_completed"] == 1
    assert trial["latest_validation"] is not None
    assert master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]


TRIAL_SCRIPT = """
import os
import determined as det
from determined import keras as det_keras
import keras
from sklearn.datasets import load_digits


class DigitsTrial(det_keras.TFKerasTrial):
    def build_model(self):
        model = self.context.wrap_model(keras.Sequential([
            keras.Input((64,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]))
        model.compile(optimizer=keras.optimizers.Adam(0.003), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
        return model

    def build_training_data_loader(self):
        x, y = load_digits(return_X_y=True)
        return (x[:1400] / 16.0).astype("float32"), y[:1400]

    def build_validation_data_loader(self):
        x, y = load_digits(return_X_y=True)
        return (x[1400:] / 16.0).astype("float32"), y[1400:]


config = {
    "hyperparameters": {"global_batch_size": 32},
    "searcher": {"name": "single", "metric": "val_accuracy", "smaller_is_better": False,
                 "max_length": {"records": 9600}},
    "scheduling_unit": 100,
    # A fixed seed makes the accuracy assertion deterministic, not a draw of the initial weights.
    "reproducibility": {"experiment_seed": 1234},
    "max_restarts": 0,
}

if __name__ == "__main__":
    exp_id = det.experimental.create(DigitsTrial, config, context_dir=os.path.dirname(os.path.abspath(__file__)))
    print(f"create() returned {exp_id}")
"""


def test_create_submits_a_tfkeras_trial_class_and_the_trial_trains_it(master, tmp_path):
    (tmp_path / "trial_script.py").write_text(TRIAL_SCRIPT)
    env = child_env({"DET_MASTER": master.info["url"], "DET_MASTER_TOKEN": master.info["token"]})
    done = subprocess.run(
        [sys.executable, "trial_script.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    exp_id = int(done.stdout.split("Created experiment ")[1].split()[0])
    assert f"create() returned {exp_id}" in done.stdout  # create() returns instead of exiting
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    (trial,) = answer["trials"]
    assert answer["experiment"]["state"] == "COMPLETED", _logs(master, trial["id"])
    assert trial["steps_completed"] == 300  # 9600 records / global_batch_size 32
    assert trial["latest_validation"]["metrics"]["val_accuracy"] > 0.85
    assert "det.experimental.create(DigitsTrial)" in _logs(master, trial["id"])
