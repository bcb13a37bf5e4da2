"""A length in records is converted to batches one way in every Trial API and the master:
Determined's `max(records // global_batch_size, 1)` — `{records: 10}` with a global batch size
of 32 trains one batch, not zero and not forever."""

from __future__ import annotations

import os

import pytest

from determined.common import expconf


@pytest.mark.parametrize(
    ("records", "batch_size", "batches"),
    [(10, 32, 1), (32, 32, 1), (63, 32, 1), (64, 32, 2), (100, 32, 3), (0, 32, 0)],
)
def test_records_to_batches_is_determineds_conversion(records, batch_size, batches):
    assert expconf.records_to_batches(records, batch_size) == batches
    assert expconf.length_to_batches({"records": records}, global_batch_size=batch_size) == batches


def test_lengths_in_epochs_need_an_epoch_size_and_name_the_key():
    assert (
        expconf.length_to_batches({"epochs": 2}, global_batch_size=32, records_per_epoch=100) == 8
    )
    with pytest.raises(
        expconf.LengthError, match="min_validation_period is in epochs.*records_per_epoch"
    ):
        expconf.length_to_batches(
            {"epochs": 1}, global_batch_size=32, where="min_validation_period"
        )
    with pytest.raises(expconf.LengthError, match="searcher.max_length: a length must be"):
        expconf.length_to_batches({"steps": 1}, global_batch_size=32, where="searcher.max_length")


def test_keras_trains_one_batch_for_ten_records_of_a_32_batch(monkeypatch, tmp_path):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np

    from determined.experimental import keras as native_keras
    from determined.keras._context import activate_native_context

    for name in [k for k in os.environ if k.startswith("DET_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    config = {
        "hyperparameters": {"global_batch_size": 32},
        "searcher": {"name": "single", "metric": "loss", "max_length": {"records": 10}},
    }
    try:
        context = native_keras.init(config, local=True)
        model = context.wrap_model(keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)]))
        model.compile(optimizer="sgd", loss="mse")
        x = np.random.default_rng(0).random((256, 4)).astype("float32")
        model.fit(x, x[:, :1], validation_data=(x[:32], x[:32, :1]))
    finally:
        activate_native_context(None)
    assert int(model.optimizer.iterations.numpy()) == 1


def test_pytorch_trains_one_batch_for_ten_records_of_a_32_batch(tmp_path):
    """The length a searcher operation of `{records: 10}` becomes on the cluster, then trained
    by the Trainer: one batch (it used to be 0 batches, read as "never stop")."""
    import torch

    from determined import pytorch
    from determined.pytorch._trainer import _length_unit

    class CountingTrial(pytorch.PyTorchTrial):
        def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
            self.context = context
            self.model = context.wrap_model(torch.nn.Linear(4, 1))
            self.optimizer = context.wrap_optimizer(
                torch.optim.SGD(self.model.parameters(), lr=0.1)
            )
            self.batches = 0

        def build_training_data_loader(self):
            data = torch.utils.data.TensorDataset(torch.rand(256, 4), torch.rand(256, 1))
            return pytorch.DataLoader(data, batch_size=self.context.get_per_slot_batch_size())

        def build_validation_data_loader(self):
            data = torch.utils.data.TensorDataset(torch.rand(32, 4), torch.rand(32, 1))
            return pytorch.DataLoader(data, batch_size=32)

        def train_batch(self, batch, epoch_idx, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            self.context.backward(loss)
            self.context.step_optimizer(self.optimizer)
            self.batches += 1
            return {"loss": loss}

        def evaluate_batch(self, batch, batch_idx):
            x, y = batch
            return {"validation_loss": torch.nn.functional.mse_loss(self.model(x), y)}

    searcher = {"name": "single", "metric": "validation_loss", "max_length": {"records": 10}}
    exp_conf = {
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": str(tmp_path),
            "storage_path": "c",
        },
        "searcher": searcher,
    }
    with pytorch.init(hparams={"global_batch_size": 32}, exp_conf=exp_conf) as context:
        length = _length_unit(searcher, context)(10)
        assert length == pytorch.Batch(1)
        trial = CountingTrial(context)
        pytorch.Trainer(trial, context).fit(max_length=length)
    assert trial.batches == 1
