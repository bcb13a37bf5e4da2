"""Determined's PyTorch tutorial (examples/tutorials/mnist_pytorch of 0.38), unchanged in shape, on
a real master with 2 CPU slots.

The trial is written the way the tutorial is: `model.py` (a conv net with `pytorch.TorchData` in
its signatures), `data.py` (a file lock around loading), `train.py` (a `PyTorchTrial` wrapping its
model and optimizer, `pytorch.DataLoader`s with `batch_size // distributed.get_size()`, `ruamel.yaml`
for local mode, `pytorch.init()` + `pytorch.Trainer(...).fit(max_length=Epoch(1), ...)`) and a
`distributed.yaml` with `slots_per_trial: 2` launching `determined.launch.torch_distributed`.
Only the data differ: scikit-learn's 8x8 digits instead of MNIST (no download), 1,500 training
images, so 47 batches of 32 split 24 + 23 across the two ranks: an epoch ends at a different
batch on each rank unless the chief's epoch length is everyone's (it used to hang).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests._support import MasterProcess, all_logs, child_env, trials, wait_for_experiment

pytestmark = pytest.mark.slow

MODEL_PY = """
from typing import Any, Dict

import torch
from torch import nn

from determined import pytorch


class Flatten(nn.Module):
    def forward(self, *args: pytorch.TorchData, **kwargs: Any) -> torch.Tensor:
        assert len(args) == 1
        x = args[0]
        assert isinstance(x, torch.Tensor)
        return x.contiguous().view(x.size(0), -1)


def build_model(hparams: Dict) -> nn.Module:
    # MNIST's 28x28 images give 144 * n_filters2 features here; the digits' 8x8 give 4.
    return nn.Sequential(
        nn.Conv2d(1, hparams["n_filters1"], 3, 1),
        nn.ReLU(),
        nn.Conv2d(hparams["n_filters1"], hparams["n_filters2"], 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout2d(hparams["dropout1"]),
        Flatten(),
        nn.Linear(4 * hparams["n_filters2"], 128),
        nn.ReLU(),
        nn.Dropout(hparams["dropout2"]),
        nn.Linear(128, 10),
        nn.LogSoftmax(dim=1),
    )
"""

DATA_PY = """
import pathlib
from typing import Any

import filelock
import torch
from sklearn.datasets import load_digits

TRAIN_SIZE = 1500  # of 1797 images; the rest validate


def get_dataset(data_dir: pathlib.Path, train: bool) -> Any:
    data_dir.mkdir(parents=True, exist_ok=True)

    # Use a file lock so that only one worker on each node prepares the data.
    with filelock.FileLock(str(data_dir / "lock")):
        digits = load_digits()
        images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
        images = (images - images.mean()) / images.std()
        labels = torch.tensor(digits.target, dtype=torch.int64)
        part = slice(None, TRAIN_SIZE) if train else slice(TRAIN_SIZE, None)
        return torch.utils.data.TensorDataset(images[part], labels[part])
"""

TRAIN_PY = '''
"""The 0.38 tutorial's train.py, on the digits."""
import argparse
import logging
import pathlib
from typing import Any, Dict

import data
import model
import torch
from ruamel import yaml
from torch import nn

import determined as det
from determined import pytorch


class MNistTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext, hparams: Dict) -> None:
        self.context = context

        # Trial-level constants.
        self.data_dir = pathlib.Path("data")
        self.batch_size = 64
        self.per_slot_batch_size = self.batch_size // self.context.distributed.get_size()

        # Define loss function.
        self.loss_fn = nn.NLLLoss()

        # Define model.
        self.model = self.context.wrap_model(model.build_model(hparams=hparams))

        # Configure optimizer.
        self.optimizer = self.context.wrap_optimizer(
            torch.optim.Adadelta(self.model.parameters(), lr=hparams["learning_rate"])
        )

    def build_training_data_loader(self) -> pytorch.DataLoader:
        train_data = data.get_dataset(self.data_dir, train=True)
        return pytorch.DataLoader(train_data, batch_size=self.per_slot_batch_size)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        validation_data = data.get_dataset(self.data_dir, train=False)
        return pytorch.DataLoader(validation_data, batch_size=self.per_slot_batch_size)

    def train_batch(
        self, batch: pytorch.TorchData, epoch_idx: int, batch_idx: int
    ) -> Dict[str, torch.Tensor]:
        batch_data, labels = batch

        output = self.model(batch_data)
        loss = self.loss_fn(output, labels)

        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)

        return {"loss": loss}

    def evaluate_batch(self, batch: pytorch.TorchData, batch_idx: int) -> Dict[str, Any]:
        batch_data, labels = batch

        output = self.model(batch_data)
        validation_loss = self.loss_fn(output, labels).item()

        pred = output.argmax(dim=1, keepdim=True)
        accuracy = pred.eq(labels.view_as(pred)).sum().item() / len(batch_data)

        return {
            "validation_loss": validation_loss,
            "accuracy": accuracy,
        }


def run(max_length, local: bool = False):
    info = det.get_cluster_info()

    if local:
        # For convenience, use hparams from const.yaml for local mode.
        yml = yaml.YAML(typ="safe", pure=True)
        conf = yml.load(pathlib.Path("./const.yaml").read_text())
        hparams = conf["hyperparameters"]
        latest_checkpoint = None
    else:
        hparams = info.trial.hparams
        latest_checkpoint = info.latest_checkpoint

    with pytorch.init() as train_context:
        trial = MNistTrial(train_context, hparams=hparams)
        trainer = pytorch.Trainer(trial, train_context)
        trainer.fit(
            max_length=max_length,
            latest_checkpoint=latest_checkpoint,
            validation_period=pytorch.Batch(100),
        )


if __name__ == "__main__":
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)

    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--batches", type=int)
    group.add_argument("--epochs", type=int)
    args = parser.parse_args()
    if args.batches:
        max_length = pytorch.Batch(args.batches)
    elif args.epochs:
        max_length = pytorch.Epoch(args.epochs)
    else:
        max_length = pytorch.Batch(100)

    local_training = det.get_cluster_info() is None
    run(max_length, local=local_training)
'''

HPARAMS = """\
hyperparameters:
  learning_rate: 1.0
  n_filters1: 8
  n_filters2: 16
  dropout1: 0.25
  dropout2: 0.5
searcher:
  name: single
  metric: validation_loss
  smaller_is_better: true
"""

CONST_YAML = "name: digits_pytorch_const\n" + HPARAMS + "entrypoint: python3 train.py --epochs 1\n"

# distributed.yaml of the tutorial, with 2 slots (and no restarts: a failure fails the test at once).
DISTRIBUTED_YAML = (
    "name: digits_pytorch_distributed\n"
    + HPARAMS
    + """\
resources:
  slots_per_trial: 2
max_restarts: 0
entrypoint: >-
  python3 -m determined.launch.torch_distributed
  python3 train.py --epochs 2
"""
)


def write_context(directory: pathlib.Path) -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "model.py": MODEL_PY,
        "data.py": DATA_PY,
        "train.py": TRAIN_PY,
        "const.yaml": CONST_YAML,
        "distributed.yaml": DISTRIBUTED_YAML,
    }
    for name, text in files.items():
        (directory / name).write_text(text.lstrip("\n"))
    return directory


def det_create(master: MasterProcess, config: pathlib.Path, context: pathlib.Path) -> int:
    """`det experiment create CONFIG CONTEXT` against `master`; the new experiment's id."""
    env = child_env(
        {"OMP_NUM_THREADS": "1", "DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token}
    )
    result = subprocess.run(
        [sys.executable, "-m", "determined.cli", "e", "create", str(config), str(context)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return int(result.stdout.strip().split()[-1])


@pytest.mark.rendezvous_ports
@pytest.mark.timeout(420)
def test_tutorial_trial_on_two_slots_with_uneven_shards_completes(start_master, tmp_path):
    master = start_master(cpu_slots=2)
    context = write_context(tmp_path / "digits_pytorch")
    exp_id = det_create(master, context / "distributed.yaml", context)

    experiment = wait_for_experiment(master, exp_id, timeout=360)
    text = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", text[-5000:]
    assert "determined.launch.torch_distributed" in text

    (trial,) = trials(master, exp_id)
    # Epoch(2) of the chief's 24 batches (47 batches of 32 split 24 + 23): 48 batches.
    assert trial["steps_completed"] == 48, text[-5000:]
    validations = master.series(trial["id"], "validation")
    assert validations and validations[-1][0] == 48
    final = validations[-1][1]
    assert {"validation_loss", "accuracy"} <= set(final)
    assert final["accuracy"] > 0.5  # two epochs learn the digits well past chance (0.1)
    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert [c["steps_completed"] for c in checkpoints] == [48]
    # Both ranks trained the same batches, counting epochs the chief's way.
    for rank in (0, 1):
        rank_lines = [
            e["line"]
            for e in master.session.get(f"/trials/{trial['id']}/logs")["logs"]
            if e.get("rank") == rank
        ]
        assert rank_lines, f"no log lines of rank {rank}:\n{text[-3000:]}"
