"""The Keras Native API and TFKerasTrial in-process: test mode, real local training, resume, errors.

A tiny MLP on scikit-learn's digits (ships offline) keeps each run to a few seconds.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import sklearn.datasets as sklearn_datasets

import determined as det
from determined import core, errors  # noqa: E402
from determined import keras as det_keras  # noqa: E402
from determined.experimental import keras as native_keras  # noqa: E402
from determined.keras import _data  # noqa: E402
from determined.keras._context import activate_native_context  # noqa: E402
from determined.keras._loop import LoopMode, ManagedLoop, TrainingSpec  # noqa: E402
from determined.keras._run import run_keras_trial  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def off_cluster(monkeypatch, tmp_path):
    for name in [k for k in os.environ if k.startswith("DET_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    yield
    activate_native_context(None)


@pytest.fixture(scope="module")
def digits():
    x, y = sklearn_datasets.load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1400], y[:1400]), (x[1400:], y[1400:])


def _config(max_batches: int, **extra):
    return {
        "hyperparameters": {"global_batch_size": 32, "hidden": 64, "lr": 0.003},
        "searcher": {
            "name": "single",
            "metric": "val_accuracy",
            "smaller_is_better": False,
            "max_length": {"batches": max_batches},
        },
        "scheduling_unit": 50,
        "reproducibility": {"experiment_seed": 7},
        **extra,
    }


def _model(context):
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(context.get_hparam("hidden"), activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    return model


def _compile(model, lr=0.003):
    model.compile(
        optimizer=keras.optimizers.Adam(lr),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )


def test_local_test_mode_trains_one_batch_validates_and_checkpoints(digits, capsys):
    (x, y), val = digits
    context = native_keras.init(_config(500), local=True, test=True)
    assert isinstance(context, det_keras.TFKerasNativeContext)
    assert context.get_hparam("hidden") == 64 and context.get_global_batch_size() == 32
    model = context.wrap_model(_model(context))
    _compile(model)
    history = model.fit(x, y, validation_data=val, epochs=30, batch_size=999)
    out = capsys.readouterr().out
    assert int(model.optimizer.iterations.numpy()) == 1  # epochs/batch_size ignored: one batch
    assert set(history.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert "trained 1 batch(es), validated and checkpointed" in out
    assert "Set local=False to submit" in out


def test_local_training_runs_the_configured_length_and_prints_a_table(digits, capsys):
    (x, y), val = digits
    context = native_keras.init(_config(300, min_validation_period={"batches": 150}), local=True)
    model = context.wrap_model(_model(context))
    _compile(model)
    history = model.fit(x, y, validation_data=val)
    out = capsys.readouterr().out
    assert int(model.optimizer.iterations.numpy()) == 300
    assert len(history.history["loss"]) == 6  # one training report per scheduling_unit (50)
    assert (
        len(history.history["val_accuracy"]) == 2
    )  # at 150 (min_validation_period) and at the end
    assert history.history["val_accuracy"][-1] > 0.9
    table = out[out.index("batches  ") :].splitlines()
    assert table[0].split() == ["batches", "loss", "accuracy", "val_loss", "val_accuracy"] or table[
        0
    ].split() == ["batches", "accuracy", "loss", "val_accuracy", "val_loss"]
    assert [line.split()[0] for line in table[2:8]] == ["50", "100", "150", "200", "250", "300"]
    assert "[local] trained 300 batches; checkpoints under" in out
    # The script continues after fit() locally, with the trained model.
    assert model.evaluate(*val, verbose=0, return_dict=True)["accuracy"] > 0.9


def test_the_fit_interception_lasts_from_init_to_the_managed_run(digits):
    (x, y), val = digits
    keras_fit = keras.Model.fit
    assert "fit" not in vars(keras.Model)  # Keras defines fit on a base class
    context = native_keras.init(_config(10), local=True, test=True)
    assert keras.Model.fit is not keras_fit
    model = context.wrap_model(_model(context))
    with pytest.raises(errors.InvalidExperimentException, match=r"before compile\(\)"):
        model.fit(x, y, validation_data=val)
    assert keras.Model.fit is not keras_fit  # a refused fit() may be retried
    _compile(model)
    model.fit(x, y, validation_data=val)
    assert keras.Model.fit is keras_fit
    assert "fit" not in vars(keras.Model)
    model.fit(x[:64], y[:64], batch_size=32, epochs=1, verbose=0)  # plain Keras again
    assert int(model.optimizer.iterations.numpy()) == 1 + 2


def test_the_fit_interception_is_removed_when_the_managed_run_fails(digits):
    (x, y), val = digits
    keras_fit = keras.Model.fit
    context = native_keras.init(_config(10), local=True, test=True)
    model = context.wrap_model(_model(context))
    _compile(model)

    def failing_run():
        assert keras.Model.fit is keras_fit  # the run itself sees Keras' own fit
        raise RuntimeError("the run failed")

    context._set_train_fn(failing_run)
    with pytest.raises(RuntimeError, match="the run failed"):
        model.fit(x, y, validation_data=val)
    assert keras.Model.fit is keras_fit


def test_deactivating_restores_fit_without_a_run():
    keras_fit = keras.Model.fit
    native_keras.init(_config(10), local=True, test=True)
    activate_native_context(None)
    assert keras.Model.fit is keras_fit and "fit" not in vars(keras.Model)
    activate_native_context(None)  # idempotent
    assert keras.Model.fit is keras_fit


def test_fit_before_compile_is_a_clear_error(digits):
    (x, y), val = digits
    context = native_keras.init(_config(10), local=True, test=True)
    model = context.wrap_model(_model(context))
    with pytest.raises(errors.InvalidExperimentException, match=r"before compile\(\)"):
        model.fit(x, y, validation_data=val)


def test_fit_without_validation_data_is_a_clear_error(digits):
    (x, y), _ = digits
    context = native_keras.init(_config(10), local=True, test=True)
    model = context.wrap_model(_model(context))
    _compile(model)
    with pytest.raises(errors.InvalidExperimentException, match="validation_data is required"):
        model.fit(x, y)


def test_models_that_were_not_wrapped_train_normally(digits):
    (x, y), val = digits
    context = native_keras.init(_config(10), local=True, test=True)
    context.wrap_model(_model(context))
    other = _model(context)
    _compile(other)
    other.fit(x[:64], y[:64], batch_size=32, epochs=2, verbose=0)
    assert int(other.optimizer.iterations.numpy()) == 4


class DigitsTrial(det.keras.TFKerasTrial):
    def build_model(self):
        model = self.context.wrap_model(_model(self.context))
        _compile(model, self.context.get_hparam("lr"))
        return model

    def build_training_data_loader(self):
        x, y = sklearn_datasets.load_digits(return_X_y=True)
        return (x[:1400] / 16.0).astype("float32"), y[:1400]

    def build_validation_data_loader(self):
        x, y = sklearn_datasets.load_digits(return_X_y=True)
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices(
            ((x[1400:] / 16.0).astype("float32"), y[1400:])
        ).batch(64)


def test_create_runs_a_tfkeras_trial_locally_in_test_mode(capsys):
    assert det.experimental.create(DigitsTrial, _config(100), local=True, test=True) is None
    out = capsys.readouterr().out
    assert "trained 1 batch(es), validated and checkpointed" in out


def test_tfkeras_trial_trains_for_real_locally():
    result = run_keras_trial(DigitsTrial, _config(150), None, on_cluster=False)
    assert result.steps_completed == 150
    assert [r.steps_completed for r in result.reports if r.group == "training"] == [50, 100, 150]
    assert result.searcher_metrics[-1] > 0.8
    assert len(result.checkpoints) == 1


def _spec(model, x, y, val, seed=3):
    return TrainingSpec(
        model=model,
        train=_data.training_source(x, y, None, batch_size=32, shuffle=True, seed=seed),
        validation=_data.validation_kwargs(val, batch_size=32),
        callbacks=[],
    )


def _fresh_model(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    _compile(model)
    return model


def test_resuming_from_a_checkpoint_continues_exactly(digits, tmp_path):
    """Train 60 batches, checkpoint; resume to 120: the same losses as 120 batches in one go."""
    (x, y), val = digits
    config = {
        "scheduling_unit": 20,
        "searcher": {"metric": "val_loss", "max_length": {"batches": 120}},
    }

    def run(max_batches, model, latest=None):
        cfg = {**config, "searcher": {**config["searcher"], "max_length": {"batches": max_batches}}}
        with core._dummy_init(checkpoint_storage=str(tmp_path / "ckpt")) as core_context:
            loop = ManagedLoop(
                core_context,
                _spec(model, x, y, val),
                config=cfg,
                global_batch_size=32,
                mode=LoopMode.LOCAL,
                latest_checkpoint=latest,
            )
            return loop.run()

    straight = run(120, _fresh_model(1))
    first = run(60, _fresh_model(1))
    resumed_model = _fresh_model(
        2
    )  # different initial weights: everything must come from the checkpoint
    second = run(120, resumed_model, latest=first.checkpoints[-1])
    assert int(resumed_model.optimizer.iterations.numpy()) == 120

    def losses(result):
        return {
            r.steps_completed: r.metrics["loss"] for r in result.reports if r.group == "training"
        }

    resumed = {**losses(first), **losses(second)}
    assert sorted(resumed) == [20, 40, 60, 80, 100, 120]
    assert resumed == pytest.approx(losses(straight), rel=1e-6, abs=1e-7)
    assert second.searcher_metrics[-1] == pytest.approx(straight.searcher_metrics[-1], rel=1e-6)


def test_array_batches_depend_only_on_the_batch_index():
    x = np.arange(100, dtype="float32").reshape(50, 2)
    source = _data.ArraySource(x, np.arange(50), None, 8, shuffle=True, seed=5)

    def labels(start, end):  # what fit() is fed: a tf.data pipeline of (x, y) batches
        return np.concatenate([y.numpy() for _, y in source.fit_kwargs(start, end)["x"]])

    whole = labels(0, 20)
    np.testing.assert_array_equal(whole, source.indices(0, 20))  # y[i] == i: the records chosen
    np.testing.assert_array_equal(
        whole, np.concatenate([labels(0, 7), labels(7, 13), labels(13, 20)])
    )
    # Each epoch (50 records) is a permutation of all records.
    assert sorted(whole[:50]) == list(range(50)) and sorted(whole[50:100]) == list(range(50))


def test_estimator_is_refused_with_install_instructions_on_tensorflow_2_16_and_later():
    from determined.experimental import estimator

    with pytest.raises(estimator.EstimatorUnavailable) as info:
        estimator.init({"hyperparameters": {"global_batch_size": 8}}, local=True, test=True)
    message = str(info.value)
    assert "removed in TensorFlow 2.16" in message
    assert "tensorflow-cpu==2.15.1" in message and "tensorflow-estimator==2.15.*" in message


class Recorder(keras.callbacks.Callback):
    def __init__(self, stop_at_epoch_end=None):
        super().__init__()
        self.events = []
        self.stop_at = stop_at_epoch_end

    def on_train_begin(self, logs=None):
        self.events.append("train_begin")

    def on_train_end(self, logs=None):
        self.events.append("train_end")

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(sorted(logs))
        if (
            self.stop_at is not None
            and len([e for e in self.events if isinstance(e, list)]) == self.stop_at
        ):
            self.model.stop_training = True


def test_user_callbacks_see_one_training_run_with_validation_logs(digits):
    (x, y), val = digits
    recorder = Recorder()
    context = native_keras.init(_config(150, min_validation_period={"batches": 100}), local=True)
    model = context.wrap_model(_model(context))
    _compile(model)
    model.fit(x, y, validation_data=val, callbacks=[recorder])
    plain, with_val = ["accuracy", "loss"], ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert recorder.events == ["train_begin", plain, with_val, with_val, "train_end"]


def test_a_callback_stopping_training_ends_the_run_early(digits):
    (x, y), val = digits
    context = native_keras.init(_config(300), local=True)
    model = context.wrap_model(_model(context))
    _compile(model)
    history = model.fit(x, y, validation_data=val, callbacks=[Recorder(stop_at_epoch_end=2)])
    assert int(model.optimizer.iterations.numpy()) == 100
    assert len(history.history["loss"]) == 2 and len(history.history["val_loss"]) == 1


def test_dataset_and_pydataset_batches_depend_only_on_the_batch_index():
    import tensorflow as tf

    dataset = tf.data.Dataset.range(10).batch(3)  # 4 batches per pass, the last one partial

    def values(kwargs):  # fit() is handed a dataset: what it yields
        return [np.asarray(batch).tolist() for batch in kwargs["x"]]

    source = _data.TFDatasetSource(dataset)
    whole = values(source.fit_kwargs(0, 6))
    assert whole == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9], [0, 1, 2], [3, 4, 5]]
    assert (
        values(source.fit_kwargs(0, 2)) + values(source.fit_kwargs(2, 6)) == whole
    )  # consecutive calls
    resumed = _data.TFDatasetSource(dataset)
    assert values(resumed.fit_kwargs(4, 6)) == whole[4:]  # a resume skips ahead

    # A dataset that reshuffles each iteration: later fit calls continue the same iteration (each
    # epoch a permutation across the calls), and a resume in a new process (the dataset built
    # again with the same seed) gets the same batches.
    def shuffled():
        return tf.data.Dataset.range(10).shuffle(10, seed=4).batch(2)

    uninterrupted = _data.TFDatasetSource(shuffled())
    calls = [values(uninterrupted.fit_kwargs(a, b)) for a, b in ((0, 3), (3, 5), (5, 8))]
    flat = [batch for call in calls for batch in call]
    assert sorted(v for batch in flat[:5] for v in batch) == list(range(10))
    assert flat[5:8] != flat[0:3]  # the second epoch is another permutation
    assert values(_data.TFDatasetSource(shuffled()).fit_kwargs(3, 8)) == flat[3:8]
    # Building a model from sample inputs (a resume into an unbuilt model) reads nothing.
    probed = _data.TFDatasetSource(shuffled())
    assert probed.sample_inputs().shape == (1,) and values(probed.fit_kwargs(0, 8)) == flat
    features = tf.data.Dataset.from_tensor_slices(
        ({"a": np.ones((6, 3), "float32")}, np.arange(6))
    ).batch(2)
    assert _data.TFDatasetSource(features).sample_inputs()["a"].shape == (1, 3)

    class Squares(keras.utils.PyDataset):
        def __len__(self):
            return 3

        def __getitem__(self, index):
            return np.array([index * index]), np.array([index])

    sequence = _data.SequenceSource(Squares())
    assert [int(b[1][0]) for b in sequence.fit_kwargs(2, 7)["x"]._batches] == [2, 0, 1, 2, 0]
