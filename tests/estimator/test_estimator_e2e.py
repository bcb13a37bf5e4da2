"""The Estimator APIs end to end on a real master-lite, TensorFlow 2.15 only (`make test`: .venv-tf215).

The master runs on this interpreter, so its trials do too (the local runner starts `python3` from
the master's environment):
* `python digits_native.py` submits itself (`det.experimental.estimator.init()`); the trial
  re-executes it through `determined.exec.native` and trains a DNNClassifier to accuracy > 0.85;
* pausing the trial and activating it resumes from its checkpoint at the same global step, and
  the training losses equal those of an uninterrupted experiment with the same seed;
* an `EstimatorTrial` runs from `entrypoint: digits_trial:DigitsTrial`, and is submitted by
  `det.experimental.create()`;
* `python digits_native.py --test` submits an archived test experiment (one batch, validation, checkpoint).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests._support import (
    TERMINAL_EXPERIMENT_STATES,
    MasterProcess,
    child_env,
    context_tarball,
    wait_for_experiment,
    wait_until,
)

HERE = pathlib.Path(__file__).resolve().parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("estimator-e2e-master")) as process:
        yield process


def _submit(
    master: MasterProcess, scripts: pathlib.Path, script: str, *args: str
) -> tuple[int, str]:
    env = child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token})
    done = subprocess.run(
        [sys.executable, script, *args],
        cwd=scripts,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    created = [line for line in done.stdout.splitlines() if line.startswith("Created experiment ")]
    assert created, done.stdout
    return int(created[0].split()[-1]), done.stdout


def _logs(master: MasterProcess, trial_id: int) -> str:
    return "\n".join(master.logs(trial_id))


def _training_losses(master: MasterProcess, trial_id: int) -> dict[int, float]:
    return {steps: metrics["loss"] for steps, metrics in master.series(trial_id, "training")}


def test_native_script_submits_itself_and_the_trial_trains_the_estimator(master, scripts):
    exp_id, out = _submit(master, scripts, "digits_native.py", "--max-batches", "300")
    assert "Exiting the program after submitting the experiment." in out
    assert "RESULT" not in out  # init() exited before the rest of the script ran
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    (trial,) = answer["trials"]
    assert answer["experiment"]["state"] == "COMPLETED", _logs(master, trial["id"])[-5000:]
    assert trial["steps_completed"] == 300
    assert trial["latest_validation"]["metrics"]["accuracy"] > 0.85
    assert [steps for steps, _ in master.series(trial["id"], "validation")] == [200, 300]
    assert sorted(_training_losses(master, trial["id"])) == [50, 100, 150, 200, 250, 300]
    logs = _logs(master, trial["id"])
    assert (
        "determined.exec.native" in logs
        and "det.experimental.estimator.init() + train_and_evaluate()" in logs
    )
    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert checkpoints and all(c["metadata"]["format"] == "estimator" for c in checkpoints)
    assert any("model.ckpt-300.index" in c["resources"] for c in checkpoints)


def test_pause_and_activate_resumes_at_the_same_global_step_with_the_same_losses(master, scripts):
    args = ("--max-batches", "500", "--seed", "99")
    paused_id, _ = _submit(master, scripts, "digits_native.py", *args)

    def reported_100() -> list[dict] | None:
        trials = master.trials(paused_id)
        latest = trials[0].get("latest_training") if trials else None
        return trials if latest and latest["steps_completed"] >= 100 else None

    trials = wait_until(reported_100, 180, "the trial to report 100 batches")
    master.session.post(f"/experiments/{paused_id}/pause")
    paused = wait_for_experiment(
        master, paused_id, {"PAUSED"} | TERMINAL_EXPERIMENT_STATES, timeout=120
    )
    assert paused["state"] == "PAUSED"

    def trial_paused() -> dict | None:  # the trial checkpoints at its next chunk end and exits
        trial = master.session.get(f"/trials/{trials[0]['id']}")["trial"]
        return trial if trial["state"] == "PAUSED" and trial["allocation_id"] is None else None

    trial = wait_until(
        trial_paused,
        120,
        "the trial to stop",
        0.3,
        details=lambda: _logs(master, trials[0]["id"])[-5000:],
    )
    paused_at, checkpoint = trial["steps_completed"], trial["latest_checkpoint"]
    assert 100 <= paused_at < 500 and checkpoint, trial
    master.session.post(f"/experiments/{paused_id}/activate")
    resumed = wait_for_experiment(
        master, paused_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True
    )
    trial = resumed["trials"][0]
    assert resumed["experiment"]["state"] == "COMPLETED", _logs(master, trial["id"])[-5000:]
    assert trial["run_id"] >= 2 and trial["steps_completed"] == 500
    assert f"resumed from checkpoint {checkpoint} at step {paused_at}" in _logs(master, trial["id"])

    straight_id, _ = _submit(master, scripts, "digits_native.py", *args)
    straight = wait_for_experiment(
        master, straight_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True
    )
    assert straight["experiment"]["state"] == "COMPLETED"
    interrupted = _training_losses(master, trial["id"])
    uninterrupted = _training_losses(master, straight["trials"][0]["id"])
    assert sorted(uninterrupted) == list(range(50, 501, 50)) == sorted(interrupted)
    # After the pause: the same batches from the same restored weights and Adam state.
    assert interrupted == pytest.approx(uninterrupted, rel=1e-4)


def test_estimator_trial_runs_from_a_module_class_entrypoint(master):
    config = {
        "name": "estimator-trial-entrypoint",
        "entrypoint": "digits_trial:DigitsTrial",
        "hyperparameters": {"global_batch_size": 32, "learning_rate": 0.01},
        "searcher": {
            "name": "single",
            "metric": "accuracy",
            "smaller_is_better": False,
            "max_length": {"batches": 300},
        },
        "scheduling_unit": 100,
        "reproducibility": {"experiment_seed": 4321},
        "max_restarts": 0,
    }
    context = context_tarball({"digits_trial.py": (HERE / "digits_trial.py").read_text()})
    exp_id = master.create_experiment(config, context)
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    (trial,) = answer["trials"]
    assert answer["experiment"]["state"] == "COMPLETED", _logs(master, trial["id"])[-5000:]
    assert trial["steps_completed"] == 300
    assert trial["latest_validation"]["metrics"]["accuracy"] > 0.85
    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert any(
        any(r.startswith("saved_models/digits/") for r in c["resources"]) for c in checkpoints
    )


def test_create_submits_an_estimator_trial_class(master, scripts):
    exp_id, out = _submit(master, scripts, "digits_trial.py")
    assert f"create() returned {exp_id}" in out
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    (trial,) = answer["trials"]
    assert answer["experiment"]["state"] == "COMPLETED", _logs(master, trial["id"])[-5000:]
    assert (
        trial["steps_completed"] == 300
    )  # searcher.max_length 9600 records / global_batch_size 32
    assert trial["latest_validation"]["metrics"]["accuracy"] > 0.85
    assert "det.experimental.create(DigitsTrial)" in _logs(master, trial["id"])


def test_test_mode_submits_an_archived_one_batch_experiment(master, scripts):
    env = child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token})
    done = subprocess.run(
        [sys.executable, "digits_native.py", "--test"],
        cwd=scripts,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    exp_id = int(done.stdout.split("Created test experiment ")[1].split()[0])
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    (trial,) = answer["trials"]
    assert answer["experiment"]["state"] == "COMPLETED", _logs(master, trial["id"])[-5000:]
    assert answer["experiment"]["archived"] is True
    assert trial["steps_completed"] == 1 and trial["latest_validation"] is not None
    assert master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
