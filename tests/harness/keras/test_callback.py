"""`det.keras.DeterminedCallback` on a plain `model.fit`, with the Core API's local (dummy) contexts."""

from __future__ import annotations

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import sklearn.datasets as sklearn_datasets

from determined import core
from determined.keras import DeterminedCallback  # noqa: E402


@pytest.fixture(scope="module")
def data():
    x, y = sklearn_datasets.load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    return (x[:320], y[:320]), (x[1500:], y[1500:])


def _model(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.003),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def _fit(model, data, epochs, callback):
    (x, y), val = data
    return model.fit(
        x,
        y,
        batch_size=32,
        epochs=epochs,
        shuffle=False,
        verbose=0,
        validation_data=val,
        callbacks=[callback],
    )


@pytest.mark.slow
def test_resume_continues_at_the_checkpointed_epoch_and_warm_start_does_not(
    data, tmp_path, monkeypatch
):
    for name in [k for k in os.environ if k.startswith("DET_")]:
        monkeypatch.delenv(name)
    storage = tmp_path / "ckpt"
    with core._dummy_init(checkpoint_storage=str(storage)) as core_context:
        straight = _fit(_model(1), data, 4, DeterminedCallback(core_context, None, "run-a"))
        first_callback = DeterminedCallback(core_context, None, "run-a", checkpoint_epochs=2)
        _fit(_model(1), data, 2, first_callback)
        checkpoint = first_callback.last_checkpoint
        metadata = json.loads((storage / checkpoint / "metadata.json").read_text())
        assert metadata == {
            "steps_completed": 20,
            "epochs_completed": 2,
            "continue_id": "run-a",
            "format": "keras",
        }

        resumed_model = _model(2)
        resumed = _fit(
            resumed_model, data, 4, DeterminedCallback(core_context, checkpoint, "run-a")
        )
        assert resumed.epoch == [2, 3]
        assert int(resumed_model.optimizer.iterations.numpy()) == 40
        np.testing.assert_allclose(resumed.history["loss"], straight.history["loss"][2:], rtol=1e-6)

        warm_model = _model(3)
        warm = _fit(warm_model, data, 1, DeterminedCallback(core_context, checkpoint, "run-b"))
        assert warm.epoch == [0]
        assert int(warm_model.optimizer.iterations.numpy()) == 10  # the optimizer started afresh
        # ...but from the checkpoint's weights: far better than a fresh model's first epoch.
        assert warm.history["loss"][0] < straight.history["loss"][0]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="train_metrics_report_period"):
        DeterminedCallback(None, None, 0, train_metrics_report_period="batch")
    with pytest.raises(ValueError, match="checkpoint_epochs"):
        DeterminedCallback(None, None, 0, checkpoint_epochs=-1)


@pytest.mark.slow
def test_a_tf_keras_model_reports_checkpoints_and_resumes_at_its_epoch(data, tmp_path, monkeypatch):
    # Determined 0.38's iris example builds a tf_keras model (tf.keras under
    # TF_USE_LEGACY_KERAS=1); tf_keras' fit asks each callback _implements_train_batch_hooks().
    tf_keras = pytest.importorskip("tf_keras")
    for name in [k for k in os.environ if k.startswith("DET_")]:
        monkeypatch.delenv(name)

    def tf_keras_model(seed):
        tf_keras.utils.set_random_seed(seed)
        model = tf_keras.Sequential(
            [tf_keras.Input((64,)), tf_keras.layers.Dense(10, activation="softmax")]
        )
        model.compile(
            tf_keras.optimizers.legacy.SGD(lr=0.1), "sparse_categorical_crossentropy", ["accuracy"]
        )
        return model

    storage = tmp_path / "ckpt"
    with core._dummy_init(checkpoint_storage=str(storage)) as core_context:
        first = DeterminedCallback(
            core_context, None, "run-a", train_metrics_report_period=5, checkpoint_epochs=2
        )
        history = _fit(tf_keras_model(1), data, 2, first)
        assert history.epoch == [0, 1] and "val_accuracy" in history.history
        metadata = json.loads((storage / first.last_checkpoint / "metadata.json").read_text())
        assert (metadata["epochs_completed"], metadata["steps_completed"]) == (2, 20)

        resumed_model = tf_keras_model(2)
        resumed = _fit(
            resumed_model, data, 4, DeterminedCallback(core_context, first.last_checkpoint, "run-a")
        )
        assert resumed.epoch == [2, 3]  # fit started at the checkpoint's epoch
        assert resumed_model._training_state is None  # a later fit() starts where it is told
