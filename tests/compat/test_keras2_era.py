"""Keras-2-era Determined code runs unchanged: tf_keras is chosen for it automatically.

Programs written the way Determined's are, on scikit-learn's iris/digits, with *no*
`TF_USE_LEGACY_KERAS` anywhere (before this, each failed under Keras 3):

* a `TFKerasTrial` shaped like Determined 0.37's `iris_tf_keras/model_def.py`
  (`tensorflow.keras.optimizers.legacy.RMSprop(lr=..., decay=...)`, positional metrics) on a real
  master: the master reads the context's source, sets `TF_USE_LEGACY_KERAS=1` for the run and says
  so in the trial's log;
* Determined 0.38's `iris_tf_keras/train.py` (Core API + `det.keras.DeterminedCallback` +
  `det.keras.TensorBoard`, `from tensorflow.keras.optimizers import legacy`) under
  `python3 -m determined.launch.tensorflow` on 2 slots (`MultiWorkerMirroredStrategy`);
* `python3 -m determined.exec.harness model_def:Trial --config ... --test` off the master;
* a 0.13 `native_impl.py` with `fit_generator`, run locally: `init()` starts it again under
  tf_keras;
* `DET_KERAS_VERSION=3` opts out (the rule's unit tests; the Keras 3 variants in
  test_keras_examples.py use it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from determined.common import keras_version
from tests._support import (
    REPO,
    TERMINAL_EXPERIMENT_STATES,
    MasterProcess,
    all_logs,
    child_env,
    submit,
    trials,
    wait_for_experiment,
)

IRIS_MODEL_DEF = """
\"\"\"Determined 0.37's iris_tf_keras/model_def.py, on sklearn's iris.\"\"\"
from typing import List

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_iris
from tensorflow.keras.layers import Dense, Input
from tensorflow.keras.losses import categorical_crossentropy
from tensorflow.keras.metrics import categorical_accuracy
from tensorflow.keras.models import Model
from tensorflow.keras.optimizers.legacy import RMSprop
from tensorflow.keras.utils import to_categorical

from determined import keras


def _split(training):
    x, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order].astype("float32"), y[order]
    part = slice(0, 120) if training else slice(120, None)
    return x[part], to_categorical(y[part], num_classes=3)


class IrisTrial(keras.TFKerasTrial):
    def __init__(self, context: keras.TFKerasTrialContext) -> None:
        self.context = context

    def build_model(self) -> Model:
        inputs = Input(shape=(4,))
        dense1 = Dense(self.context.get_hparam("layer1_dense_size"), activation="relu")(inputs)
        dense2 = Dense(3, activation="softmax")(dense1)
        model = self.context.wrap_model(Model(inputs=inputs, outputs=dense2))
        optimizer = RMSprop(
            lr=self.context.get_hparam("learning_rate"),
            decay=self.context.get_hparam("learning_rate_decay"),
        )
        optimizer = self.context.wrap_optimizer(optimizer)
        model.compile(optimizer, categorical_crossentropy, [categorical_accuracy])
        return model

    def keras_callbacks(self) -> List[tf.keras.callbacks.Callback]:
        return []

    def build_training_data_loader(self) -> keras.InputData:
        return _split(training=True)

    def build_validation_data_loader(self) -> keras.InputData:
        return _split(training=False)
"""

IRIS_HPARAMS = {
    "learning_rate": 0.01,
    "learning_rate_decay": 1.0e-6,
    "layer1_dense_size": 16,
    "global_batch_size": 16,
}

IRIS_CONFIG = {
    "name": "iris_tf_keras_const",
    "hyperparameters": IRIS_HPARAMS,
    "searcher": {
        "name": "single",
        "metric": "val_categorical_accuracy",
        "smaller_is_better": False,
        "max_length": {"batches": 200},
    },
    "min_validation_period": {"batches": 100},
    "scheduling_unit": 100,
    "max_restarts": 0,
    "entrypoint": "model_def:IrisTrial",
}

# Determined 0.38's iris_tf_keras/train.py (Core API + DeterminedCallback), data from sklearn.
IRIS_TRAIN = """
import argparse
import logging

import numpy as np
from sklearn.datasets import load_iris
from tensorflow.keras import layers, losses, metrics, models, utils
from tensorflow.keras.optimizers import legacy

import determined as det
import determined.keras


def get_data(training):
    x, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order].astype("float32"), y[order]
    part = slice(0, 120) if training else slice(120, None)
    return x[part], utils.to_categorical(y[part], num_classes=3)


def main(core_context, strategy, checkpoint, continue_id, hparams, epochs):
    train_x, train_y = get_data(True)
    validation_data = get_data(False)
    with strategy.scope():
        inputs = layers.Input(shape=(4,))
        dense1 = layers.Dense(hparams["layer1_dense_size"])(inputs)
        dense2 = layers.Dense(3, activation="softmax")(dense1)
        model = models.Model(inputs=inputs, outputs=dense2)
        optimizer = legacy.RMSprop(
            lr=hparams["learning_rate"], decay=hparams["learning_rate_decay"]
        )
        model.compile(optimizer, losses.categorical_crossentropy, [metrics.categorical_accuracy])
    det_cb = det.keras.DeterminedCallback(
        core_context, checkpoint=checkpoint, continue_id=continue_id, checkpoint_epochs=0
    )
    tb_cb = det.keras.TensorBoard(core_context, update_freq="batch", profile_batch=0)
    model.fit(
        x=train_x,
        y=train_y,
        batch_size=hparams["global_batch_size"],
        validation_data=validation_data,
        epochs=epochs,
        callbacks=[det_cb, tb_cb],
    )
    print("KERAS", type(model).__module__.split(".")[0], flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=500)
    args = parser.parse_args()
    info = det.get_cluster_info()
    assert info and info.task_type == "TRIAL"
    distributed, strategy = det.core.DistributedContext.from_tf_config()
    with det.core.init(distributed=distributed) as core_context:
        main(core_context, strategy, info.latest_checkpoint, info.trial.trial_id,
             info.trial.hparams, args.epochs)
"""


@pytest.mark.parametrize(
    "source, why",
    [
        ("import tensorflow as tf\nclass T(det.keras.TFKerasTrial): ...\n", "a TFKerasTrial"),
        ("from tensorflow.keras.optimizers import legacy\n", "optimizers.legacy"),
        (
            "import tensorflow as tf\nopt = tf.keras.optimizers.legacy.Adam(lr=1)\n",
            "optimizers.legacy",
        ),
        ("from tensorflow import keras\nmodel.fit_generator(gen)\n", "fit_generator"),
        (
            "from tensorflow import keras\nfrom determined.experimental.keras import init\n",
            "the Native API (det.experimental.keras.init)",
        ),
        # Keras 3 code (imports the keras package) and code without Keras decide nothing.
        ("import keras\nimport tensorflow as tf\nclass T(TFKerasTrial): ...\n", None),
        ("from keras import layers\nfrom tensorflow.keras.optimizers import legacy\n", None),
        ("import torch\nclass T(PyTorchTrial): ...\n", None),
        (
            "import determined.keras\nfrom determined import keras\nk.fit_generator(g)\n",
            "fit_generator",
        ),
    ],
)
def test_keras2_code_is_recognised_from_its_source(source: str, why: str | None) -> None:
    assert keras_version.keras2_reason(source) == why


def test_the_environment_decides_first(tmp_path: Path) -> None:
    code = tmp_path / "model_def.py"
    code.write_text("from tensorflow.keras.optimizers import legacy\n")
    added, line = keras_version.legacy_environment({}, [code], base=tmp_path)
    assert added == {"TF_USE_LEGACY_KERAS": "1"}
    assert line and "model_def.py: optimizers.legacy" in line and "DET_KERAS_VERSION=3" in line
    for opt_out in ({"DET_KERAS_VERSION": "3"}, {"TF_USE_LEGACY_KERAS": "0"}):
        assert keras_version.legacy_environment(opt_out, [code]) == ({}, None)
    # Already chosen by the user: nothing to add or say.
    assert keras_version.legacy_environment({"TF_USE_LEGACY_KERAS": "1"}, [code]) == ({}, None)
    # DET_KERAS_VERSION=2 asks for tf_keras whatever the code is.
    plain = tmp_path / "plain.py"
    plain.write_text("print('no keras')\n")
    added, _ = keras_version.legacy_environment({"DET_KERAS_VERSION": "2"}, [plain])
    assert added == {"TF_USE_LEGACY_KERAS": "1"}
    assert keras_version.legacy_environment({}, [plain]) == ({}, None)


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    with MasterProcess(tmp_path_factory.mktemp("keras2-era-master")) as process:
        yield process


@pytest.mark.slow
def test_iris_tfkeras_trial_gets_tf_keras_without_being_told(master: MasterProcess) -> None:
    exp_id = submit(master, IRIS_CONFIG, {"model_def.py": IRIS_MODEL_DEF})
    answer = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300, full=True)
    logs = all_logs(master, exp_id)
    assert answer["experiment"]["state"] == "COMPLETED", logs[-4000:]
    assert "tf.keras is tf_keras (Keras 2) for this trial: Keras 2 code (model_def.py: " in logs
    (trial,) = answer["trials"]
    assert trial["steps_completed"] == 200
    validations = master.series(trial["id"], "validation")
    assert [steps for steps, _ in validations] == [100, 200]
    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert {c["metadata"]["keras"] for c in checkpoints} == {"tf_keras"}


@pytest.mark.slow
@pytest.mark.rendezvous_ports
def test_iris_core_api_with_determined_callback_on_two_slots(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master(cpu_slots=2)
    config = {
        "name": "iris_tf_keras_distributed",
        "hyperparameters": {**IRIS_HPARAMS, "learning_rate": 0.05, "global_batch_size": 32},
        "resources": {"slots_per_trial": 2},
        "searcher": {
            "name": "single",
            "metric": "val_categorical_accuracy",
            "smaller_is_better": False,
        },
        "max_restarts": 0,
        "entrypoint": "python3 -m determined.launch.tensorflow -- python3 train.py --epochs 3",
    }
    exp_id = submit(master, config, {"train.py": IRIS_TRAIN})
    experiment = wait_for_experiment(master, exp_id, timeout=300)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs[-6000:]
    assert "optimizers.legacy" in logs and "tf.keras is tf_keras" in logs
    assert "rank=0] KERAS tf_keras" in logs and "rank=1] KERAS tf_keras" in logs
    (trial,) = trials(master, exp_id)
    validation = master.series(trial["id"], "validation")
    assert [metrics["epochs"] for _, metrics in validation] == [1, 2, 3]
    assert "val_categorical_accuracy" in validation[-1][1]
    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert len(checkpoints) == 1  # checkpoint_epochs=0: only at the end


def _local_env(tmp_path: Path) -> dict[str, str]:
    env = child_env(
        {"XDG_DATA_HOME": str(tmp_path / "xdg"), "PYTHONPATH": f"{REPO / 'harness'}:{REPO}"}
    )
    for name in [k for k in env if k.startswith("DET_")]:
        del env[name]
    env.pop("TF_USE_LEGACY_KERAS", None)
    return env


@pytest.mark.slow
def test_harness_off_the_master_chooses_tf_keras(tmp_path: Path) -> None:
    (tmp_path / "model_def.py").write_text(textwrap.dedent(IRIS_MODEL_DEF))
    (tmp_path / "const.yaml").write_text(json.dumps(IRIS_CONFIG))
    done = subprocess.run(
        [sys.executable, "-m", "determined.exec.harness", "model_def:IrisTrial"]
        + ["--config", "const.yaml", "--test"],
        cwd=tmp_path,
        env=_local_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "tf.keras is tf_keras (Keras 2)" in output


NATIVE_FIT_GENERATOR = """
import tensorflow as tf
from sklearn.datasets import load_digits
from tensorflow import keras

import determined as det
from determined.experimental.keras import init
from determined.keras import _ArrayLikeAdapter

config = {
    "hyperparameters": {"global_batch_size": det.Constant(value=32)},
    "searcher": {"name": "single", "metric": "val_accuracy", "max_length": {"batches": 40}},
}
context = init(config, local=True, test=False)
x, y = load_digits(return_X_y=True)
x = x / 16.0
train = _ArrayLikeAdapter(x=x[:1400], y=y[:1400], batch_size=32)
test = _ArrayLikeAdapter(x=x[1400:], y=y[1400:], batch_size=32)
model = context.wrap_model(keras.Sequential([keras.layers.Dense(10)]))
model.compile(
    optimizer=keras.optimizers.legacy.Adam(lr=0.01),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
)
model.fit_generator(generator=train, validation_data=test, epochs=1)
print("KERAS", type(model).__module__.split(".")[0])
"""


@pytest.mark.slow
def test_native_script_with_fit_generator_restarts_under_tf_keras(tmp_path: Path) -> None:
    (tmp_path / "native_impl.py").write_text(textwrap.dedent(NATIVE_FIT_GENERATOR))
    done = subprocess.run(
        [sys.executable, "native_impl.py"],
        cwd=tmp_path,
        env=_local_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "starting the script again" in done.stderr
    assert "KERAS tf_keras" in done.stdout
