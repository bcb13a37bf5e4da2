"""Determined-compatible Estimator code, TensorFlow 2.15 only (`make test`: .venv-tf215).

* a v1 canned Estimator (`tf.compat.v1.estimator.DNNClassifier`, not a `tf.estimator.Estimator`
  subclass in TensorFlow 2) on iris as an `EstimatorTrial` written like Determined 0.13's examples
  (iris_v1_trial.py): trained locally, in the local test mode, and (`-m slow`) on a real master-lite;
  its training dataset does not repeat (the harness repeats it, as Determined did);
* `ServingInputReceiverFn` + `load_estimator_from_checkpoint_path`: the checkpoint's SavedModel
  loaded back and predicting;
* the Native API (`det.experimental.estimator.init`) accepting a v1 `LinearClassifier`;
* `det.estimator.RunHook` callbacks and `make_metric` with a `MetricReducer` or a function.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import pathlib
import shutil

import numpy as np
import pytest

from tests._support import (
    TERMINAL_EXPERIMENT_STATES,
    MasterProcess,
    context_tarball,
    wait_for_experiment,
)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = pathlib.Path(__file__).resolve().parent


def _iris_module():
    """iris_v1_trial.py as a fresh module."""
    spec = importlib.util.spec_from_file_location("iris_v1_trial", HERE / "iris_v1_trial.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _examples(module, rows) -> list[bytes]:
    import tensorflow as tf

    return [
        tf.train.Example(
            features=tf.train.Features(
                feature={module.FEATURE: tf.train.Feature(float_list=tf.train.FloatList(value=row))}
            )
        ).SerializeToString()
        for row in rows
    ]


def test_v1_dnn_classifier_trial_trains_validates_checkpoints_and_loads_back(tmp_path, capsys):
    import tensorflow as tf

    from determined import estimator as det_estimator
    from determined.estimator._run import run_estimator_trial

    module = _iris_module()
    trials = []

    class Recorded(module.IrisTrial):
        def __init__(self, context):
            super().__init__(context)
            trials.append(self)

    config = {
        **module.CONFIG,
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path)},
    }
    result = run_estimator_trial(Recorded, config, None, on_cluster=False)

    (trial,) = trials
    built = trial.build_estimator()
    assert isinstance(built, tf.compat.v1.estimator.Estimator)
    assert not isinstance(built, tf.estimator.Estimator)
    assert result.steps_completed == 200  # 120 rows / 16 per batch: the dataset was repeated
    validations = {r.steps_completed: r.metrics for r in result.reports if r.group == "validation"}
    assert sorted(validations) == [100, 200]
    assert validations[200]["accuracy"] > 0.85
    assert "[local] batches 200:" in capsys.readouterr().out
    assert trial.note.events == ["checkpoint", "close"]

    (storage_id,) = result.checkpoints
    checkpoint = tmp_path / storage_id
    metadata = json.loads((checkpoint / "metadata.json").read_text())
    assert metadata["format"] == "estimator" and metadata["steps_completed"] == 200
    assert (checkpoint / "model.ckpt-200.index").exists()
    assert (checkpoint / "note.txt").read_text() == "written by a RunHook\n"
    (export,) = (checkpoint / "saved_models" / "iris_parsing").iterdir()
    assert (export / "saved_model.pb").exists()

    # The SavedModel of build_serving_input_receiver_fns(), loaded back: predicts as evaluated.
    loaded = det_estimator.load_estimator_from_checkpoint_path(str(checkpoint))
    assert {"predict", "serving_default"} <= set(loaded.signatures)
    _, _, val_x, val_y = module.iris_split()
    out = loaded.signatures["predict"](examples=tf.constant(_examples(module, val_x)))
    accuracy = float(np.mean(out["class_ids"].numpy().ravel() == val_y))
    assert accuracy == pytest.approx(validations[200]["accuracy"], abs=1e-6)
    assert out["probabilities"].shape == (len(val_x), module.NUM_CLASSES)

    # Resuming: on_checkpoint_load hears the checkpoint directory before training goes on.
    trials.clear()
    longer = {**config, "searcher": {**config["searcher"], "max_length": {"batches": 250}}}
    resumed = run_estimator_trial(
        Recorded, longer, None, on_cluster=False, latest_checkpoint=storage_id
    )
    assert resumed.steps_completed == 250
    assert trials[0].note.events == ["load", "checkpoint", "close"]


def test_load_estimator_from_checkpoint_path_needs_exactly_one_saved_model(tmp_path, caplog):
    from determined import estimator as det_estimator

    (tmp_path / "metadata.json").write_text(json.dumps({"framework": "torch-2", "format": "x"}))
    with caplog.at_level(logging.WARNING, logger="determined.estimator"):
        with pytest.raises(FileNotFoundError, match="holds no SavedModel"):
            det_estimator.load_estimator_from_checkpoint_path(str(tmp_path))
    assert "does not appear to be a valid EstimatorTrial checkpoint" in caplog.text
    for name in ("a", "b"):
        (tmp_path / "saved_models" / name / "1").mkdir(parents=True)
        (tmp_path / "saved_models" / name / "1" / "saved_model.pb").write_bytes(b"")
    with pytest.raises(AssertionError, match="multiple nested saved_model.pb"):
        det_estimator.load_estimator_from_checkpoint_path(str(tmp_path))


def test_v1_estimator_trial_in_the_local_test_mode(capsys):
    import determined as det

    module = _iris_module()
    det.experimental.create(module.IrisTrial, module.CONFIG, local=True, test=True)
    out = capsys.readouterr().out
    assert "[local test] trained 1 batch(es), validated and checkpointed" in out
    assert "val_accuracy" in out


def test_native_api_accepts_a_v1_linear_classifier(tmp_path):
    import tensorflow as tf

    import determined as det

    module = _iris_module()
    config = {
        "hyperparameters": {"global_batch_size": 16},
        "searcher": {
            "name": "single",
            "metric": "accuracy",
            "smaller_is_better": False,
            "max_length": {"batches": 40},
        },
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path)},
    }
    context = det.experimental.estimator.init(config, local=True, test=False)
    train_x, train_y, val_x, val_y = module.iris_split()
    column = tf.feature_column.numeric_column(module.FEATURE, shape=(module.NUM_FEATURES,))
    estimator = tf.compat.v1.estimator.LinearClassifier(
        feature_columns=[column],
        n_classes=module.NUM_CLASSES,
        optimizer=tf.compat.v1.train.FtrlOptimizer(0.5),
        config=context.wrap_run_config(tf.estimator.RunConfig()),
    )
    batch = context.get_per_slot_batch_size()
    train_spec = tf.estimator.TrainSpec(
        lambda: tf.data.Dataset.from_tensor_slices(({module.FEATURE: train_x}, train_y)).batch(
            batch
        )
    )
    eval_spec = tf.estimator.EvalSpec(
        lambda: tf.data.Dataset.from_tensor_slices(({module.FEATURE: val_x}, val_y)).batch(batch),
        steps=None,
    )
    metrics, exports = context.train_and_evaluate(estimator, train_spec, eval_spec)
    assert exports == [] and {"accuracy", "loss"} <= set(metrics)
    assert int(tf.train.load_variable(estimator.model_dir, "global_step")) == 40


def test_make_metric_with_a_reducer_and_a_function_and_context_experimental():
    import tensorflow as tf

    from determined import estimator as det_estimator

    class Mean(det_estimator.MetricReducer):
        def __init__(self):
            self.total, self.count = 0.0, 0

        def accumulate(self, metric):
            self.total += float(np.sum(metric))
            self.count += len(metric)
            return self.total, self.count

        def cross_slot_reduce(self, per_slot_metrics):
            totals, counts = zip(*per_slot_metrics, strict=True)
            return sum(totals) / sum(counts)

    context = det_estimator.EstimatorTrialContext.from_config(
        {"hyperparameters": {"global_batch_size": 4}}
    )

    def model_fn(features, labels, mode):
        x = features["x"]
        weight = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.zeros_initializer())
        loss = tf.reduce_mean(tf.square(x * weight - labels))
        eval_metric_ops = {
            "mean_x": context.make_metric(x, Mean(), np.float32),
            "max_x": context.experimental.make_metric(
                {"x": x}, lambda batches: max(np.max(b["x"]) for b in batches), np.float64
            ),
            "count": context.make_metric([x, labels], lambda batches: len(batches), np.int64),
        }
        return tf.compat.v1.estimator.EstimatorSpec(
            mode, loss=loss, eval_metric_ops=eval_metric_ops
        )

    estimator = tf.compat.v1.estimator.Estimator(model_fn)
    values = np.arange(10, dtype=np.float32)
    results = estimator.evaluate(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": values}, values)).batch(4)
    )
    assert results["mean_x"] == pytest.approx(4.5)
    assert results["max_x"] == pytest.approx(9.0)
    assert results["count"] == 3  # three batches: 4 + 4 + 2
    assert context.experimental.allgather_metrics({"a": 1}) == [{"a": 1}]


def test_run_hook_is_a_session_run_hook_and_the_exports_match_determined():
    import tensorflow as tf

    from determined import estimator as det_estimator

    assert issubclass(det_estimator.RunHook, tf.estimator.SessionRunHook)
    hook = det_estimator.RunHook()
    assert hook.on_checkpoint_load("x") is None and hook.on_trial_close() is None
    names = {  # Determined 0.13-0.24's determined.estimator public names
        "EstimatorTrial",
        "EstimatorTrialContext",
        "EstimatorNativeContext",
        "EstimatorContext",
        "EstimatorExperimentalContext",
        "ServingInputReceiverFn",
        "MetricReducer",
        "RunHook",
        "load_estimator_from_checkpoint_path",
    }
    for name in names:
        assert hasattr(det_estimator, name), name
    assert (
        set(det_estimator.__all__) == names
    )  # and none of ours (tests/harness/test_package_exports.py)
    assert issubclass(det_estimator.EstimatorTrialContext, det_estimator.EstimatorContext)


@pytest.mark.slow
def test_v1_estimator_trial_on_a_real_master(tmp_path_factory):
    import tensorflow as tf

    from determined import estimator as det_estimator

    module = _iris_module()
    with MasterProcess(tmp_path_factory.mktemp("estimator-compat-master")) as master:
        config = {
            **module.CONFIG,
            "name": "iris-v1-estimator",
            "entrypoint": "iris_v1_trial:IrisTrial",
        }
        context = context_tarball({"iris_v1_trial.py": (HERE / "iris_v1_trial.py").read_text()})
        exp_id = master.create_experiment(config, context)
        answer = wait_for_experiment(
            master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True
        )
        (trial,) = answer["trials"]
        logs = "\n".join(master.logs(trial["id"]))
        assert answer["experiment"]["state"] == "COMPLETED", logs[-5000:]
        assert trial["steps_completed"] == 200
        assert [steps for steps, _ in master.series(trial["id"], "validation")] == [100, 200]
        assert trial["latest_validation"]["metrics"]["accuracy"] > 0.85, logs[-8000:]
        checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
        (latest,) = [c for c in checkpoints if c["metadata"]["steps_completed"] == 200]
        assert latest["metadata"]["format"] == "estimator"
        resources = latest["resources"]
        assert "model.ckpt-200.index" in resources and "note.txt" in resources
        assert any(r.startswith("saved_models/iris_parsing/") for r in resources)
        (stored,) = [p for p in master.root_dir.rglob(latest["uuid"]) if p.is_dir()]
        copy = tmp_path_factory.mktemp("downloaded") / "ckpt"
        shutil.copytree(stored, copy)
    loaded = det_estimator.load_estimator_from_checkpoint_path(str(copy))
    _, _, val_x, val_y = module.iris_split()
    out = loaded.signatures["predict"](examples=tf.constant(_examples(module, val_x)))
    assert float(np.mean(out["class_ids"].numpy().ravel() == val_y)) > 0.85
