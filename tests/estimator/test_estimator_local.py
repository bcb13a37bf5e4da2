"""Estimator Native API and EstimatorTrial in-process (local/test modes), TensorFlow 2.15 only.

Run by `make test` in .venv-tf215 (see conftest.py): a real DNNClassifier / custom model_fn on
scikit-learn's digits, trained by the managed loop (chunked `train(max_steps=...)` + `evaluate`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    return env


def _run_native(scripts: pathlib.Path, *args: str) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "digits_native.py", *args],
        cwd=scripts,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line[len("RESULT ") :]), done.stdout


def test_native_local_test_mode_trains_one_batch_validates_and_checkpoints(scripts):
    result, out = _run_native(scripts, "--local", "--test")
    assert result["global_step"] == 1
    assert {"accuracy", "loss"} <= set(result["metrics"])
    assert "[local test] trained 1 batch(es), validated and checkpointed" in out
    assert "Set local=False to submit" in out


def test_native_local_mode_trains_for_max_length_and_checkpoints_to_storage(scripts, tmp_path):
    result, out = _run_native(
        scripts, "--local", "--max-batches", "300", "--storage", str(tmp_path)
    )
    assert result["global_step"] == 300
    assert result["metrics"]["accuracy"] > 0.85
    assert (
        "[local] batches 200:" in out and "[local] batches 300:" in out
    )  # min_validation_period 200
    (checkpoint,) = [p for p in (tmp_path / "ckpts").iterdir() if p.is_dir()]
    metadata = json.loads((checkpoint / "metadata.json").read_text())
    assert metadata["format"] == "estimator" and metadata["steps_completed"] == 300
    assert (checkpoint / "model.ckpt-300.index").exists()
    assert 'model_checkpoint_path: "model.ckpt-300"' in (checkpoint / "checkpoint").read_text()


def test_ten_records_of_a_32_batch_train_one_batch(scripts):
    """Determined's conversion, as in Keras and PyTorch: max(records // batch size, 1)."""
    result, _ = _run_native(scripts, "--local", "--max-records", "10")
    assert result["global_step"] == 1


def _trial_class(scripts):
    """digits_trial.py loaded as a fresh module (the class must not be shared between tests)."""
    spec = importlib.util.spec_from_file_location("digits_trial", scripts / "digits_trial.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_estimator_trial_local_test_mode_through_create(scripts, capsys):
    import determined as det

    module = _trial_class(scripts)
    det.experimental.create(module.DigitsTrial, module.CONFIG, local=True, test=True)
    out = capsys.readouterr().out
    assert "[local test] trained 1 batch(es), validated and checkpointed" in out
    assert "val_accuracy" in out  # the metrics table


def _dummy_core(storage: pathlib.Path):
    from determined import core

    return core._dummy_init(checkpoint_storage=str(storage))


def _train(module, storage, *, max_batches, latest_checkpoint=None, serving=True):
    from determined.common import expconf
    from determined.estimator import _run

    config = expconf.apply_defaults(
        {
            **module.CONFIG,
            "searcher": {**module.CONFIG["searcher"], "max_length": {"batches": max_batches}},
        }
    )
    trial_class = module.DigitsTrial
    if not serving:
        trial_class = type(
            "NoServing",
            (module.DigitsTrial,),
            {"build_serving_input_receiver_fns": lambda self: {}},
        )
    with _dummy_core(storage) as core_context:
        return _run.train_trial_class(
            trial_class,
            core_context,
            config=config,
            hparams={"global_batch_size": 32, "learning_rate": 0.01},
            trial_seed=77,
            mode=_run.LoopMode.LOCAL,
            latest_checkpoint=latest_checkpoint,
        )


def _losses(result) -> dict:
    return {r.steps_completed: r.metrics["loss"] for r in result.reports if r.group == "training"}


def test_estimator_trial_resumes_from_its_checkpoint_exactly_where_it_stopped(scripts, tmp_path):
    module = _trial_class(scripts)
    first = _train(module, tmp_path, max_batches=200, serving=False)
    assert first.steps_completed == 200 and len(first.checkpoints) == 1
    resumed = _train(
        module, tmp_path, max_batches=400, latest_checkpoint=first.checkpoints[0], serving=False
    )
    assert resumed.steps_completed == 400
    assert sorted(_losses(resumed)) == [300, 400]  # it went on from the global step 200
    straight = _train(module, tmp_path, max_batches=400, serving=False)
    # Same seed, same batches (the input skips what was trained), same restored Adam state.
    assert _losses(resumed) == pytest.approx(
        {s: v for s, v in _losses(straight).items() if s > 200}, rel=1e-4
    )
    assert _losses(first) == pytest.approx(
        {s: v for s, v in _losses(straight).items() if s <= 200}, rel=1e-4
    )
    assert resumed.last_validation["accuracy"] == pytest.approx(
        straight.last_validation["accuracy"], abs=1e-6
    )
    assert straight.last_validation["accuracy"] > 0.85


def test_checkpoints_hold_a_saved_model_per_serving_input_receiver_fn(scripts, tmp_path):
    import tensorflow as tf

    module = _trial_class(scripts)
    result = _train(module, tmp_path, max_batches=20)
    (storage_id,) = result.checkpoints
    exported = list((tmp_path / storage_id / "saved_models" / "digits").iterdir())
    assert len(exported) == 1 and (exported[0] / "saved_model.pb").exists()
    loaded = tf.saved_model.load(str(exported[0]))
    assert "serving_default" in loaded.signatures


def test_a_training_dataset_that_ends_is_repeated_as_determined_does(scripts, tmp_path):
    import tensorflow as tf

    module = _trial_class(scripts)

    class OneEpoch(module.DigitsTrial):
        def build_train_spec(self):
            x, y = module._digits()
            return tf.estimator.TrainSpec(
                lambda: tf.data.Dataset.from_tensor_slices(({"x": x[:320]}, y[:320])).batch(32)
            )

    result = _run_trial_class(OneEpoch, tmp_path, max_batches=50)  # 10 batches per epoch
    assert result.steps_completed == 50


def test_a_tensor_training_input_that_runs_out_is_refused(scripts, tmp_path):
    import tensorflow as tf

    from determined import errors

    module = _trial_class(scripts)

    class OneEpochTensors(module.DigitsTrial):
        def build_train_spec(self):
            x, y = module._digits()

            def input_fn():
                dataset = tf.data.Dataset.from_tensor_slices(({"x": x[:320]}, y[:320])).batch(32)
                return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()

            return tf.estimator.TrainSpec(input_fn)

    with pytest.raises(
        errors.InvalidExperimentException, match=r"ran out of data at step 10.*must not end"
    ):
        _run_trial_class(OneEpochTensors, tmp_path, max_batches=50)


def _run_trial_class(trial_class, storage, *, max_batches):
    from determined.common import expconf
    from determined.estimator import _run

    config = expconf.apply_defaults(
        {
            "hyperparameters": {"global_batch_size": 32},
            "searcher": {
                "name": "single",
                "metric": "accuracy",
                "smaller_is_better": False,
                "max_length": {"batches": max_batches},
            },
        }
    )
    with _dummy_core(storage) as core_context:
        return _run.train_trial_class(
            trial_class,
            core_context,
            config=config,
            hparams={"global_batch_size": 32, "learning_rate": 0.01},
            trial_seed=1,
            mode=_run.LoopMode.LOCAL,
        )


def test_a_searcher_metric_that_evaluate_does_not_return_is_named(scripts, tmp_path):
    from determined import errors

    module = _trial_class(scripts)
    NoServing = type(
        "NoServing", (module.DigitsTrial,), {"build_serving_input_receiver_fns": lambda self: {}}
    )
    config_metric = {
        "hyperparameters": {"global_batch_size": 32},
        "searcher": {"name": "single", "metric": "val_accuracy", "max_length": {"batches": 5}},
    }
    from determined.common import expconf
    from determined.estimator import _run

    with (
        _dummy_core(tmp_path) as core_context,
        pytest.raises(
            errors.InvalidExperimentException,
            match=r"'val_accuracy' is not among the validation metrics \(accuracy, loss",
        ),
    ):
        _run.train_trial_class(
            NoServing,
            core_context,
            config=expconf.apply_defaults(config_metric),
            hparams={"global_batch_size": 32, "learning_rate": 0.01},
            trial_seed=1,
            mode=_run.LoopMode.LOCAL,
        )


def test_the_harness_dispatches_estimator_trials(scripts, tmp_path):
    (scripts / "local.yaml").write_text(
        json.dumps(
            {
                "hyperparameters": {"global_batch_size": 32, "learning_rate": 0.01},
                "searcher": {
                    "name": "single",
                    "metric": "accuracy",
                    "smaller_is_better": False,
                    "max_length": {"batches": 1},
                },
                "checkpoint_storage": {
                    "type": "shared_fs",
                    "host_path": str(tmp_path),
                    "storage_path": "ckpts",
                },
            }
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "determined.exec.harness",
            "digits_trial:DigitsTrial",
            "--config",
            "local.yaml",
            "--test",
        ],
        cwd=scripts,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    assert "[local test] trained 1 batch(es)" in done.stdout


def test_importing_determined_estimator_does_not_import_tensorflow():
    code = "import determined.estimator, determined.experimental.estimator, sys; print('tensorflow' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60
    )
    # The availability check of determined.experimental.estimator runs at init(), not at import.
    assert done.stdout.strip() == "False", done.stderr
