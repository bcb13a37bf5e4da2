"""Keras programs written the way Determined's own examples are, run unchanged.

* `model_def:IrisTrial`, a `TFKerasTrial` shaped like Determined's `iris_tf_keras` example
  (`det.keras.InputData` loaders, `det.keras.callbacks.TensorBoard` in `keras_callbacks()`), on
  scikit-learn's iris (no download), is created on a real master twice: in Keras 3, and in Keras 2
  (`TF_USE_LEGACY_KERAS=1` in `environment.environment_variables`, with the example's own
  `optimizers.legacy.RMSprop(lr=..., decay=...)`). Each completes with validation metrics, a
  checkpoint, and real TensorBoard event files in checkpoint storage.
* a `native_impl.py`-style script (Determined 0.13's fashion-MNIST Native example:
  `from determined.keras import _ArrayLikeAdapter`, `det.experimental.keras.init()`, `fit` /
  `fit_generator` with an adapter as validation data) runs locally, in Keras 3 and in tf_keras,
  and submits itself to a real master (no `--local`), where it trains as the trial.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from determined.keras import _flavor
from tests._support import (
    REPO,
    TERMINAL_EXPERIMENT_STATES,
    MasterProcess,
    all_logs,
    child_env,
    submit,
    wait_for_experiment,
)

pytestmark = pytest.mark.slow

MODEL_DEF = """
\"\"\"Iris species from four measurements (Determined's iris_tf_keras example, on sklearn's iris).\"\"\"
from typing import List

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_iris
from tensorflow.keras.layers import Dense, Input
from tensorflow.keras.losses import categorical_crossentropy
from tensorflow.keras.metrics import categorical_accuracy
from tensorflow.keras.models import Model
from tensorflow.keras.utils import to_categorical
{optimizer_import}

from determined import keras

NUM_CLASSES = 3


def _split(training):
    x, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order].astype("float32"), y[order]
    part = slice(0, 120) if training else slice(120, None)
    return x[part], to_categorical(y[part], num_classes=NUM_CLASSES)


class IrisTrial(keras.TFKerasTrial):
    def __init__(self, context: keras.TFKerasTrialContext) -> None:
        self.context = context

    def build_model(self) -> Model:
        inputs = Input(shape=(4,))
        dense1 = Dense(self.context.get_hparam("layer1_dense_size"), activation="relu")(inputs)
        dense2 = Dense(NUM_CLASSES, activation="softmax")(dense1)
        model = self.context.wrap_model(Model(inputs=inputs, outputs=dense2))
        optimizer = {optimizer}
        optimizer = self.context.wrap_optimizer(optimizer)
        {compile}
        return model

    def keras_callbacks(self) -> List[tf.keras.callbacks.Callback]:
        return [keras.callbacks.TensorBoard(update_freq="batch", profile_batch=0, histogram_freq=1)]

    def build_training_data_loader(self) -> keras.InputData:
        return _split(training=True)

    def build_validation_data_loader(self) -> keras.InputData:
        return _split(training=False)
"""

# Keras 3's compile() takes loss_weights third: the example's positional metrics are Keras 2's.
KERAS3 = {
    "compile": "model.compile(optimizer, categorical_crossentropy, metrics=[categorical_accuracy])",
    "optimizer_import": "from tensorflow.keras.optimizers import RMSprop",
    "optimizer": 'RMSprop(learning_rate=self.context.get_hparam("learning_rate"))',
}
TF_KERAS = {
    "compile": "model.compile(optimizer, categorical_crossentropy, [categorical_accuracy])",
    "optimizer_import": "from tensorflow.keras.optimizers.legacy import RMSprop",
    "optimizer": (
        'RMSprop(lr=self.context.get_hparam("learning_rate"), '
        'decay=self.context.get_hparam("learning_rate_decay"))'
    ),
}


def _config(legacy: bool) -> dict:
    config = {
        "name": "iris_tf_keras_const",
        "hyperparameters": {
            "learning_rate": 0.01,
            "learning_rate_decay": 1.0e-6,
            "layer1_dense_size": 16,
            "global_batch_size": 16,
        },
        "searcher": {
            "name": "single",
            "metric": "val_categorical_accuracy",
            "smaller_is_better": False,
            "max_length": {"batches": 300},
        },
        "min_validation_period": {"batches": 100},
        "scheduling_unit": 100,
        "reproducibility": {"experiment_seed": 11},
        "max_restarts": 0,
        "entrypoint": "model_def:IrisTrial",
    }
    # A TFKerasTrial gets tf_keras by itself (test_keras2_era.py); Keras 3 is the opt-out.
    variable = "TF_USE_LEGACY_KERAS=1" if legacy else "DET_KERAS_VERSION=3"
    config["environment"] = {"environment_variables": [variable]}
    return config


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("compat-keras-master")) as process:
        yield process


def _summary_tags(path: pathlib.Path) -> set[str]:
    """The summary tags in an event file, read by TensorBoard's own loader."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    tags = set()
    for event in EventFileLoader(str(path)).Load():
        tags |= {value.tag for value in event.summary.value}
    return tags


@pytest.mark.parametrize("legacy", [False, True], ids=["keras3", "tf_keras"])
def test_iris_tfkeras_trial_with_tensorboard(master, legacy):
    files = {"model_def.py": MODEL_DEF.format(**(TF_KERAS if legacy else KERAS3))}
    exp_id = submit(master, _config(legacy), files)
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    (trial,) = answer["trials"]
    logs = all_logs(master, exp_id)
    assert answer["experiment"]["state"] == "COMPLETED", logs[-4000:]
    assert trial["steps_completed"] == 300

    validations = master.series(trial["id"], "validation")
    assert [steps for steps, _ in validations] == [100, 200, 300]
    final = validations[-1][1]
    assert {"val_loss", "val_categorical_accuracy"} <= set(final)
    assert final["val_categorical_accuracy"] > 0.6, validations

    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert checkpoints
    storage = master.root_dir / "checkpoints"
    latest = storage / checkpoints[-1]["uuid"]
    assert (latest / "model.keras").is_file()
    metadata = json.loads((latest / "metadata.json").read_text())
    assert metadata["keras"] == ("tf_keras" if legacy else "keras")
    if legacy:
        assert (latest / "determined-keras-model-weights.index").is_file()

    tb_dir = storage / "tensorboard" / "experiment" / str(exp_id) / "trial" / str(trial["id"])
    event_files = sorted(tb_dir.rglob("events.out.tfevents.*"))
    assert event_files, f"no event files under {tb_dir}"
    tags = set().union(*(_summary_tags(f) for f in event_files))
    assert "epoch_loss" in tags, tags
    assert any(tag.startswith("epoch_val_") or tag == "epoch_categorical_accuracy" for tag in tags)
    assert any(tag.endswith("/histogram") for tag in tags), tags  # histogram_freq=1
    if not legacy:
        # Keras 3 writes fit's batch logs for update_freq="batch"; tf_keras calls its batch hooks
        # only when profiling or write_steps_per_second is on (as in plain tf_keras).
        assert any(tag.startswith("batch_") for tag in tags), tags


NATIVE_IMPL = """
\"\"\"Determined 0.13's native_fashion_mnist_tf_keras/native_impl.py, on sklearn's digits.\"\"\"
import argparse
import json
import pathlib

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from tensorflow import keras

import determined as det
from determined.experimental.keras import init
from determined.keras import _ArrayLikeAdapter, TFKerasNativeContext


def build_model(context: TFKerasNativeContext) -> tf.keras.Model:
    model = keras.Sequential(
        [
            keras.layers.Flatten(input_shape=(8, 8)),
            keras.layers.Dense(context.get_hparam("dense1"), activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model = context.wrap_model(model)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(name="Adam"),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", dest="config", default="{}")
    parser.add_argument("--local", action="store_true")
    parser.add_argument("--test", action="store_true")
    parser.add_argument("--use-fit", action="store_true")
    args = parser.parse_args()

    config = {
        "hyperparameters": {
            "global_batch_size": det.Constant(value=32),
            "dense1": det.Constant(value=128),
        },
        "records_per_epoch": 1400,
        "searcher": {"name": "single", "metric": "val_accuracy", "max_length": {"epochs": 3}},
    }
    config.update(json.loads(args.config))

    context = init(config, local=args.local, test=args.test, context_dir=str(pathlib.Path.cwd()))

    images, labels = load_digits(return_X_y=True)
    images = images.reshape(-1, 8, 8) / 16.0
    train_images, train_labels = images[:1400], labels[:1400]
    train_data = _ArrayLikeAdapter(
        x=train_images, y=train_labels, batch_size=context.get_per_slot_batch_size()
    )
    test_images, test_labels = images[1400:], labels[1400:]
    test_data = _ArrayLikeAdapter(
        x=test_images, y=test_labels, batch_size=context.get_per_slot_batch_size()
    )

    model = build_model(context)

    if args.use_fit:
        history = model.fit(
            x=train_images,
            y=train_labels,
            batch_size=context.get_per_slot_batch_size(),
            validation_data=test_data,
            use_multiprocessing=False,
            workers=1,
            max_queue_size=10,
            epochs=1,
        )
    else:
        history = model.fit_generator(
            generator=train_data,
            validation_data=test_data,
            use_multiprocessing=False,
            workers=1,
            max_queue_size=10,
            epochs=1,
        )
    print("KERAS", type(model).__module__.split(".")[0])
    print("FINAL", json.dumps({k: v[-1] for k, v in history.history.items()}))
"""


@pytest.mark.parametrize(
    "legacy, use_fit",
    [(False, True), (True, True), (True, False)],
    ids=["keras3-fit", "tf_keras-fit", "tf_keras-fit_generator"],
)
def test_native_impl_script_runs_locally(tmp_path, legacy, use_fit):
    (tmp_path / "native_impl.py").write_text(textwrap.dedent(NATIVE_IMPL))
    env = child_env(
        {"XDG_DATA_HOME": str(tmp_path / "xdg"), "PYTHONPATH": f"{REPO / 'harness'}:{REPO}"}
    )
    for name in [k for k in env if k.startswith("DET_")]:
        del env[name]
    env.pop("TF_USE_LEGACY_KERAS", None)
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = "1"
    else:
        env["DET_KERAS_VERSION"] = "3"  # a Native script is Keras 2 code unless opted out
    done = subprocess.run(
        [sys.executable, "native_impl.py", "--local", *(["--use-fit"] if use_fit else [])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"KERAS {'tf_keras' if legacy else 'keras'}" in done.stdout
    final = [line for line in done.stdout.splitlines() if line.startswith("FINAL ")]
    assert final, done.stdout[-3000:]
    metrics = json.loads(final[-1][len("FINAL ") :])
    assert metrics["val_accuracy"] > 0.7, metrics


KERAS_OF = {False: _flavor.KERAS3, True: _flavor.TF_KERAS}


@pytest.mark.parametrize("legacy", [False, True], ids=["keras3", "tf_keras"])
def test_native_impl_script_submits_itself_and_trains_on_the_master(master, tmp_path, legacy):
    # Without --local, Determined 0.13's Native script submits itself (its directory is the
    # context) and exits; the master runs it again as the trial, where `fit_generator` trains.
    (tmp_path / "native_impl.py").write_text(textwrap.dedent(NATIVE_IMPL))
    env = child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token})
    env.pop("TF_USE_LEGACY_KERAS", None)
    keras3_env = {"environment": {"environment_variables": ["DET_KERAS_VERSION=3"]}}
    args = ["--use-fit", "--config", json.dumps(keras3_env)]  # Keras 3 has no fit_generator
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = "1"
        legacy_env = {"environment": {"environment_variables": ["TF_USE_LEGACY_KERAS=1"]}}
        args = ["--config", json.dumps(legacy_env)]  # and fit_generator, as the example
    done = subprocess.run(
        [sys.executable, "native_impl.py", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    created = [line for line in done.stdout.splitlines() if line.startswith("Created experiment ")]
    assert created, done.stdout[-3000:]
    exp_id = int(created[0].split()[-1])

    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    logs = all_logs(master, exp_id)
    assert answer["experiment"]["state"] == "COMPLETED", logs[-4000:]
    (trial,) = answer["trials"]
    # max_length {epochs: 3} of 1,400 records in batches of 32: 3 x 44 batches.
    assert trial["steps_completed"] == 132
    assert trial["latest_validation"]["metrics"]["val_accuracy"] > 0.7
    # The checkpoint says which Keras trained it: the trial ran the model the script built.
    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert checkpoints
    assert {c["metadata"]["keras"] for c in checkpoints} == {KERAS_OF[legacy]}


# Every public name of Determined 0.38's determined.keras, and what 0.13-0.37 examples import.
DETERMINED_NAMES = [
    "callbacks",
    "_ArrayLikeAdapter",
    "ArrayLike",
    "SequenceAdapter",
    "InputData",
    "TFKerasTensorBoard",
    "TFKerasExperimentalContext",
    "TFKerasTrainConfig",
    "TFKerasTrialContext",
    "TFKerasTrial",
    "load_model_from_checkpoint_path",
    "get_rng_state",
    "set_rng_state",
    "DeterminedCallback",
    "TensorBoard",
    "TFKerasNativeContext",
    "TFKerasContext",
]


def test_determined_keras_names_and_adapters(tmp_path):
    import keras
    import numpy as np

    import determined.keras as det_keras

    missing = [name for name in DETERMINED_NAMES if not hasattr(det_keras, name)]
    assert not missing
    assert {"Callback", "EarlyStopping", "ReduceLROnPlateau", "TensorBoard"} <= set(
        det_keras.callbacks.__all__
    )
    x, y = np.arange(20.0).reshape(10, 2), np.arange(10)
    adapter = det_keras._ArrayLikeAdapter(x, y, batch_size=4)
    assert len(adapter) == 3 and adapter[2][0].shape == (2, 2)
    assert len(det_keras._ArrayLikeAdapter(x, y, batch_size=4, drop_leftovers=True)) == 2
    assert det_keras.SequenceAdapter(adapter, workers=4).sequence is adapter

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    model.save(tmp_path / "model.keras")
    loaded = det_keras.load_model_from_checkpoint_path(str(tmp_path))
    assert np.allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    state = det_keras.get_rng_state()
    first = np.random.rand()
    det_keras.set_rng_state(state)
    assert np.random.rand() == first


def test_tf_keras_fit_interception_is_scoped(tmp_path, monkeypatch):
    import tf_keras

    from determined import keras as det_keras
    from determined.keras import _context

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    fit_before = vars(tf_keras.Model).get("fit")
    context = det_keras.TFKerasNativeContext(
        {"hyperparameters": {"global_batch_size": 8}}, {"global_batch_size": 8}, trial_seed=1
    )
    _context.activate_native_context(context)
    try:
        model = context.wrap_model(
            tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(2,))])
        )
        assert model is context._model
        assert vars(tf_keras.Model)["fit"] is _context._managed_fit
    finally:
        _context.activate_native_context(None)
    assert vars(tf_keras.Model).get("fit") is fit_before
    with pytest.raises(TypeError, match="tf_keras.Model"):
        context.wrap_model(object())
