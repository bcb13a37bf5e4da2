"""Where tf.estimator does not exist (the main .venv: TensorFlow >= 2.16), every Estimator entry
point refuses with the same error: why, and what to install. Collected only there (conftest.py)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _trial_class():
    from determined import estimator as det_estimator

    class SomeEstimatorTrial(det_estimator.EstimatorTrial):
        pass

    return SomeEstimatorTrial


def _assert_explains(error: Exception) -> None:
    message = str(error)
    assert "needs tf.estimator" in message and "removed in TensorFlow 2.16" in message
    assert "tensorflow-cpu==2.15.1" in message and "tensorflow-estimator==2.15.*" in message


@pytest.mark.parametrize("local,test", [(True, True), (True, False), (False, False)])
def test_init_refuses_in_every_mode(local, test, tmp_path):
    from determined.experimental import estimator

    with pytest.raises(estimator.EstimatorUnavailable) as info:
        estimator.init(
            {"hyperparameters": {"global_batch_size": 8}},
            local=local,
            test=test,
            context_dir=str(tmp_path),
        )
    _assert_explains(info.value)


@pytest.mark.parametrize("local", [True, False])
def test_create_refuses_an_estimator_trial(local, tmp_path):
    import determined as det
    from determined.estimator._availability import EstimatorUnavailable

    with pytest.raises(EstimatorUnavailable) as info:
        det.experimental.create(
            _trial_class(),
            {"hyperparameters": {"global_batch_size": 8}},
            local=local,
            test=True,
            context_dir=str(tmp_path),
        )
    _assert_explains(info.value)
    assert "det.experimental.create(SomeEstimatorTrial)" in str(info.value)


def test_the_harness_dispatches_an_estimator_trial_to_the_runner_that_refuses():
    from determined.estimator._availability import EstimatorUnavailable
    from determined.estimator._run import run_estimator_trial
    from determined.exec.harness import runner_for

    trial_class = _trial_class()
    assert runner_for(trial_class) is run_estimator_trial
    with pytest.raises(EstimatorUnavailable) as info:
        run_estimator_trial(
            trial_class, {"hyperparameters": {"global_batch_size": 8}}, None, on_cluster=False
        )
    _assert_explains(info.value)


def test_determined_estimator_imports_without_tensorflow():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "harness"), str(ROOT)])}
    code = (
        "import sys, determined as det; det.estimator.EstimatorTrial; det.experimental.estimator.init; "
        "print(sorted(m for m in ('tensorflow', 'tensorflow_estimator') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stderr
