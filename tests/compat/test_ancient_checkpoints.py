"""Checkpoints written by old Determined releases load with `det.pytorch.load_trial_from_checkpoint_path`
and `det.keras.load_model_from_checkpoint_path`, as Determined's own loaders load them.

Each test recreates, with our own torch/tf_keras code, a checkpoint directory laid out as that
release wrote it (the layouts below are what Determined's harness wrote and what its
`ancient-checkpoints` test fixtures hold; the files here are written afresh, not copied):

* PyTorch 0.13.13 and 0.17.6: `state_dict.pth` (`models_state_dict`, `optimizers_state_dict`,
  `lr_schedulers_state_dict`, `callbacks`, `rng_state`) and `code/` (the model definition), no
  `load_data.json`: the trial class, hyperparameters and config come from the `metadata.json`
  that `Checkpoint.download()` wrote from the master's record (`experiment_config.entrypoint`).
  0.13's "old" trials define `build_model()`; loading one returns the bare `torch.nn.Module`.
* PyTorch 0.17.7 to 0.20: `load_data.json` (`trial_type`, `experiment_config`, `hparams`,
  `trial_cls_spec`) beside `state_dict.pth` and `code/`; the trial class is imported from `code/`.
* PyTorch 0.21 (the Trainer API): `load_data.json` with `is_trainer: true`, null
  `experiment_config`/`hparams`, a trial taking extra arguments (`trial_kwargs`); a trial defined
  in `__main__` is passed as `trial_class`.
* Keras 0.13.7 (`format: h5`, `determined-keras-model.h5`), 0.17.6 (`format: saved_weights`,
  TensorFlow checkpoint files `determined-keras-model-weights.*`, `metadata.json`) and 0.17.7
  (the same weights with `load_data.json`): the trial's `build_model()` gets the weights.
"""

from __future__ import annotations

import json
import pathlib
import pickle
import random
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch

import determined as det
from determined import pytorch
from tests._support import REPO

WEIGHT = [[0.25, -1.5]]  # what the "trained" model holds; a fresh one starts at zeros

FLEX_TRIAL = """
import torch
from torch import nn

from determined import pytorch


class Ones(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return torch.ones(2)


class TwoVarTrial(pytorch.PyTorchTrial):
    def __init__(self, context{extra_args}):
        self.context = context
        self.model = context.wrap_model(nn.Linear(2, 1, bias=False))
        self.model.weight.data.fill_(0)
        self.opt = context.wrap_optimizer(
            torch.optim.SGD(self.model.parameters(), lr={lr}){wrap_kwargs}
        )

    def train_batch(self, batch, epoch_idx, batch_idx):
        loss = self.model(batch).sum()
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {{"loss": loss}}

    def evaluate_batch(self, batch):
        return {{"loss": self.model(batch).sum()}}

    def build_training_data_loader(self):
        return pytorch.DataLoader(Ones(), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self):
        return pytorch.DataLoader(Ones(), batch_size=self.context.get_per_slot_batch_size())
"""

# The pre-0.14 PyTorchTrial interface: the harness called build_model() and optimizer(model).
OLD_TRIAL = """
import torch
from torch import nn

from determined.pytorch import DataLoader, PyTorchTrial


class TwoVarTrial(PyTorchTrial):
    def __init__(self, context):
        self.context = context

    def build_model(self):
        model = nn.Linear(2, 1, False)
        model.weight.data.fill_(0)
        return model

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), 0.001)

    def train_batch(self, batch, model, epoch_idx, batch_idx):
        return {"loss": model(batch).sum()}

    def evaluate_batch(self, batch, model):
        return {"loss": model(batch).sum()}

    def build_training_data_loader(self):
        return DataLoader(torch.ones(8, 2), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self):
        return DataLoader(torch.ones(8, 2), batch_size=self.context.get_per_slot_batch_size())
"""

TRAINER_SCRIPT = """
import model_def

from determined import pytorch

if __name__ == "__main__":
    with pytorch.init() as context:
        trial = model_def.TwoVarTrial(context, lr=0.01)
        pytorch.Trainer(trial, context).fit()
"""


def _experiment_config(entrypoint: str) -> dict[str, Any]:
    return {
        "description": "ancient-two-var",
        "entrypoint": entrypoint,
        "hyperparameters": {"global_batch_size": {"type": "const", "val": 4}},
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        "checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp/determined-cp"},
        "optimizations": {"aggregation_frequency": 1, "average_training_metrics": False},
        "reproducibility": {"experiment_seed": 1651612249},
        "resources": {"slots_per_trial": 1},
        "max_restarts": 0,
        "records_per_epoch": 0,
    }


def _state_dict() -> dict[str, Any]:
    """What PyTorchTrial's checkpoint held in every release from 0.13 to 0.21."""
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor(WEIGHT))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    return {
        "models_state_dict": [model.state_dict()],
        "optimizers_state_dict": [optimizer.state_dict()],
        "lr_schedulers_state_dict": [],
        "callbacks": {},
        "rng_state": {
            "cpu_rng_state": torch.random.get_rng_state(),
            "np_rng_state": np.random.get_state(),
            "random_rng_state": random.getstate(),
        },
    }


def _write_pytorch_checkpoint(directory: pathlib.Path, release: str) -> pathlib.Path:
    """A checkpoint directory as Determined `release` wrote it (and `Checkpoint.download()` completed)."""
    ckpt = directory / f"{release}-pytorch"
    code = ckpt / "code"
    code.mkdir(parents=True)
    spec = "model_def:TwoVarTrial"
    config = _experiment_config(spec)
    hparams = {"global_batch_size": 4}
    flex = FLEX_TRIAL.format(extra_args="", lr="0.001", wrap_kwargs="")
    if release == "0.13.13-old":
        (code / "model_def.py").write_text(OLD_TRIAL)
    elif release == "0.13.13-flex":
        (code / "model_def.py").write_text(
            FLEX_TRIAL.format(extra_args="", lr="0.001", wrap_kwargs=", backward_passes_per_step=2")
        )
    elif release.startswith("0.21"):
        (code / "model_def.py").write_text(
            FLEX_TRIAL.format(extra_args=", lr", lr="lr", wrap_kwargs="")
        )
        (code / "train.py").write_text(TRAINER_SCRIPT)
    else:
        (code / "model_def.py").write_text(flex)
    (code / "const.yaml").write_text(json.dumps(config))
    torch.save(_state_dict(), ckpt / "state_dict.pth")

    version = release.split("-")[0]
    if release.startswith(("0.13", "0.17.6")):
        # No load_data.json: Checkpoint.download() wrote the master's record as metadata.json.
        framework = "torch-1.4.0" if version == "0.13.13" else "torch-1.9.0+cpu"
        metadata = {
            "determined_version": version,
            "framework": framework,
            "format": "cloudpickle" if version == "0.13.13" else "pickle",
            "experiment_id": 10,
            "trial_id": 10,
            "hparams": hparams,
            "experiment_config": config,
            "metadata": {},
        }
        (ckpt / "metadata.json").write_text(json.dumps(metadata))
        if version == "0.17.6":
            (ckpt / "workload_sequencer.pkl").write_bytes(pickle.dumps({"batches_trained": 1}))
        return ckpt
    load_data: dict[str, Any] = {
        "trial_type": "PyTorchTrial",
        "experiment_config": config,
        "hparams": hparams,
        "trial_cls_spec": spec,
    }
    if release.startswith("0.21"):
        load_data.update(experiment_config=None, hparams=None, is_trainer=True)
        if release.endswith("main"):
            load_data["trial_cls_spec"] = "__main__:TwoVarTrial"
        (ckpt / "trial_state.pkl").write_bytes(pickle.dumps({"batches_trained": 1}))
        (ckpt / "metadata.json").write_text(
            json.dumps({"determined_version": "0.21.0", "steps_completed": 1, "format": "pickle"})
        )
    else:
        (ckpt / "workload_sequencer.pkl").write_bytes(pickle.dumps({"batches_trained": 1}))
        (ckpt / "metadata.json").write_text(
            json.dumps({"latest_batch": 1, "framework": "torch-1.9.0+cpu", "format": "pickle"})
        )
    (ckpt / "load_data.json").write_text(json.dumps(load_data))
    return ckpt


def _trial_class_from_code(ckpt: pathlib.Path, spec: str) -> Any:
    """How Determined's docs load a trial whose class the loader cannot import by itself."""
    module_name, _, name = spec.partition(":")
    with det.import_from_path(ckpt / "code"):
        module = __import__(module_name)
    return getattr(module, name)


@pytest.mark.parametrize(
    ("release", "trial_spec", "trial_kwargs"),
    [
        ("0.13.13-flex", None, {}),
        ("0.17.6", None, {}),
        ("0.17.7", None, {}),
        ("0.20.0", None, {}),
        ("0.21.0", None, {"lr": 0.001}),
        ("0.21.0-main", "model_def:TwoVarTrial", {"lr": 0.001}),
        # The class given even where the checkpoint's own would import.
        ("0.21.0", "model_def:TwoVarTrial", {"lr": 0.001}),
    ],
)
def test_pytorch_checkpoints_of_determined_0_13_to_0_21_load_their_trial(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    release: str,
    trial_spec: str | None,
    trial_kwargs: dict[str, Any],
) -> None:
    ckpt = _write_pytorch_checkpoint(tmp_path, release)
    monkeypatch.chdir(tmp_path)  # not the code directory: the loader finds `code/` itself
    trial_class = _trial_class_from_code(ckpt, trial_spec) if trial_spec else None
    trial = pytorch.load_trial_from_checkpoint_path(
        str(ckpt),
        trial_class=trial_class,
        trial_kwargs=trial_kwargs,
        torch_load_kwargs={"map_location": "cpu"},
    )
    assert isinstance(trial, pytorch.PyTorchTrial), type(trial)
    assert trial.model.weight.tolist() == WEIGHT  # type: ignore[attr-defined]
    assert "model_def" not in sys.modules  # the checkpoint's code did not stay importable
    if release.startswith(("0.13", "0.17.6")):
        # The hyperparameters of the master's record, which the trial reads as it did then.
        assert trial.context.get_per_slot_batch_size() == 4  # type: ignore[attr-defined]


def test_an_old_api_pytorch_checkpoint_loads_as_the_bare_model(tmp_path: pathlib.Path) -> None:
    ckpt = _write_pytorch_checkpoint(tmp_path, "0.13.13-old")
    model = pytorch.load_trial_from_checkpoint_path(str(ckpt))
    assert isinstance(model, torch.nn.Module) and not isinstance(model, pytorch.PyTorchTrial)
    assert model.weight.tolist() == WEIGHT

    # Before 0.12.13 the single model's state was `model_state_dict`.
    state = torch.load(ckpt / "state_dict.pth", weights_only=False)
    state["model_state_dict"] = state.pop("models_state_dict")[0]
    torch.save(state, ckpt / "state_dict.pth")
    model = pytorch.load_trial_from_checkpoint_path(str(ckpt))
    assert model.weight.tolist() == WEIGHT


def test_a_checkpoint_without_load_data_or_metadata_says_what_to_do(tmp_path: pathlib.Path) -> None:
    ckpt = _write_pytorch_checkpoint(tmp_path, "0.17.6")
    (ckpt / "metadata.json").unlink()
    with pytest.raises(FileNotFoundError, match="load_data.json nor metadata.json") as info:
        pytorch.load_trial_from_checkpoint_path(str(ckpt))
    assert "Checkpoint.download()" in str(info.value)
    assert "write_metadata_file" in str(info.value)


def test_a_trainer_checkpoint_of_a_main_module_trial_asks_for_the_class(
    tmp_path: pathlib.Path,
) -> None:
    ckpt = _write_pytorch_checkpoint(tmp_path, "0.21.0-main")
    with pytest.raises(ValueError, match="__main__.*trial_class="):
        pytorch.load_trial_from_checkpoint_path(str(ckpt), trial_kwargs={"lr": 0.001})


KERAS_TRIAL = """
import numpy as np
from tensorflow.keras.layers import Dense
from tensorflow.keras.losses import mean_squared_error
from tensorflow.keras.models import Sequential
from tensorflow.keras.optimizers import SGD
from tensorflow.keras.utils import Sequence

from determined.keras import TFKerasTrial


class Ones(Sequence):
    def __init__(self, batch_size):
        self.batch_size = batch_size

    def __len__(self):
        return 4

    def __getitem__(self, idx):
        return np.ones((self.batch_size, 2)), np.ones((self.batch_size, 1))


class TwoVarTrial(TFKerasTrial):
    def __init__(self, context):
        self.context = context
        self.lr = self.context.get_hparams()["learning_rate"]

    def build_model(self):
        model = Sequential()
        model.add(Dense(1, use_bias=False, kernel_initializer="zeros", input_shape=(2,)))
        model = self.context.wrap_model(model)
        optimizer = self.context.wrap_optimizer(SGD(learning_rate=self.lr))
        model.compile(optimizer, mean_squared_error)
        return model

    def build_training_data_loader(self):
        return Ones(self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self):
        return Ones(self.context.get_per_slot_batch_size())
"""

# Writes a Keras checkpoint as Determined `release` did, with tf_keras (Keras 2, as Determined
# had), then loads it with `det.keras.load_model_from_checkpoint_path` in the same process.
KERAS_SCRIPT = """
import json, pathlib, sys

import tf_keras

release, ckpt = sys.argv[1], pathlib.Path(sys.argv[2])
model = tf_keras.Sequential([tf_keras.layers.Dense(1, use_bias=False, input_shape=(2,))])
model.layers[0].kernel.assign([[0.25], [-1.5]])
model.compile(tf_keras.optimizers.legacy.SGD(learning_rate=0.1), "mse")
model.fit([[1.0, 1.0]], [[0.0]], verbose=0)  # the optimizer has slots to save, as a trained one
model.layers[0].kernel.assign([[0.25], [-1.5]])
if release == "0.13.7":
    model.save(ckpt / "determined-keras-model.h5")
else:
    model.save_weights(str(ckpt / "determined-keras-model-weights"))
print("WROTE", sorted(p.name for p in ckpt.iterdir()), flush=True)
"""

KERAS_LOAD = """
import sys

from determined import keras

model = keras.load_model_from_checkpoint_path(sys.argv[1])
print("MODULE", type(model).__module__.split(".")[0])
print("KERNEL", model.layers[0].get_weights()[0].ravel().tolist())
"""


def _write_keras_checkpoint(
    directory: pathlib.Path, release: str, portable: bool = False
) -> pathlib.Path:
    ckpt = directory / f"{release}-keras"
    code = ckpt / "code"
    code.mkdir(parents=True)
    trial = KERAS_TRIAL
    if portable:  # code that also runs under Keras 3 (no Keras-2-only loss function)
        trial = trial.replace(
            "from tensorflow.keras.losses import mean_squared_error", 'mean_squared_error = "mse"'
        )
    (code / "model_def.py").write_text(trial)
    config = _experiment_config("model_def:TwoVarTrial")
    config["hyperparameters"]["learning_rate"] = {"type": "const", "val": 0.0001}
    hparams = {"global_batch_size": 4, "learning_rate": 0.0001}
    fmt = "h5" if release == "0.13.7" else "saved_weights"
    if release == "0.17.7":
        (ckpt / "metadata.json").write_text(
            json.dumps({"latest_batch": 1, "framework": "tensorflow-2.4.4", "format": fmt})
        )
        (ckpt / "load_data.json").write_text(
            json.dumps(
                {
                    "trial_type": "TFKerasTrial",
                    "experiment_config": config,
                    "hparams": hparams,
                    "trial_cls_spec": "model_def:TwoVarTrial",
                }
            )
        )
    else:
        (ckpt / "metadata.json").write_text(
            json.dumps(
                {
                    "determined_version": release,
                    "framework": "tensorflow-2.4.4",
                    "format": fmt,
                    "hparams": hparams,
                    "experiment_config": config,
                    "metadata": {},
                }
            )
        )
    (ckpt / "rng_state.pkl").write_bytes(pickle.dumps({"np_rng_state": np.random.get_state()}))
    (ckpt / "determined-callbacks.v1.pkl").write_bytes(pickle.dumps({}))
    env = {**_env(), "TF_USE_LEGACY_KERAS": "1"}
    run = subprocess.run(
        [sys.executable, "-c", KERAS_SCRIPT, release, str(ckpt)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return ckpt


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env["PYTHONPATH"] = f"{REPO}:{REPO / 'harness'}"
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _load_in_a_process(ckpt: pathlib.Path, legacy_keras: bool) -> subprocess.CompletedProcess:
    env = _env()
    if legacy_keras:
        env["TF_USE_LEGACY_KERAS"] = "1"  # `tensorflow.keras` is Keras 2, as in Determined's days
    return subprocess.run(
        [sys.executable, "-c", KERAS_LOAD, str(ckpt)],
        env=env,
        cwd=ckpt.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("release", ["0.13.7", "0.17.6", "0.17.7"])
@pytest.mark.parametrize("legacy_keras", [True, False], ids=["tf_keras", "keras3"])
def test_keras_checkpoints_of_determined_0_13_and_0_17_load_their_model(
    tmp_path: pathlib.Path, release: str, legacy_keras: bool
) -> None:
    # Under tf_keras the code as Determined's users wrote it; under Keras 3 code that runs there.
    ckpt = _write_keras_checkpoint(tmp_path, release, portable=not legacy_keras)
    run = _load_in_a_process(ckpt, legacy_keras)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines() if " " in line)
    assert json.loads(lines["KERNEL"]) == [0.25, -1.5]
    assert lines["MODULE"] == ("tf_keras" if legacy_keras else "keras")


def test_keras_2_only_code_under_keras_3_says_to_use_tf_keras(tmp_path: pathlib.Path) -> None:
    ckpt = _write_keras_checkpoint(tmp_path, "0.17.7")
    run = _load_in_a_process(ckpt, legacy_keras=False)
    assert run.returncode != 0
    assert "cannot import 'model_def'" in run.stderr
    assert "set TF_USE_LEGACY_KERAS=1" in run.stderr
