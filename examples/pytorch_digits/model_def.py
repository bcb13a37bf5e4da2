"""A PyTorchTrial: a small MLP classifying sklearn's 8x8 handwritten digits (1797 images).

Run it on the master with `det e create const.yaml .` (or random.yaml for a search), or locally
with `python3 trainer_main.py`.
"""

from typing import Any

import torch
from sklearn.datasets import load_digits
from torch import nn

import determined.pytorch as det_torch

TRAIN_SIZE = 1500  # the remaining 297 images are the validation set


def digits_datasets() -> tuple:
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    train = torch.utils.data.TensorDataset(x[:TRAIN_SIZE], y[:TRAIN_SIZE])
    validation = torch.utils.data.TensorDataset(x[TRAIN_SIZE:], y[TRAIN_SIZE:])
    return train, validation


class DigitsTrial(det_torch.PyTorchTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        torch.set_num_threads(1)
        self.context = context
        hidden = int(context.get_hparam("hidden_size"))
        self.model = context.wrap_model(
            nn.Sequential(
                nn.Linear(64, hidden),
                nn.ReLU(),
                nn.Dropout(float(context.get_hparams().get("dropout", 0.0))),
                nn.Linear(hidden, 10),
            )
        )
        self.optimizer = context.wrap_optimizer(
            torch.optim.SGD(
                self.model.parameters(), lr=float(context.get_hparam("learning_rate")), momentum=0.9
            )
        )
        self.train_data, self.validation_data = digits_datasets()
        self.loss_fn = nn.CrossEntropyLoss()

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(
            self.train_data, batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(
            self.validation_data, batch_size=self.context.get_per_slot_batch_size()
        )

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        logits = self.model(x)
        loss = self.loss_fn(logits, y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss, "accuracy": (logits.argmax(dim=1) == y).float().mean()}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        logits = self.model(x)
        return {
            "validation_loss": self.loss_fn(logits, y),
            "validation_accuracy": (logits.argmax(dim=1) == y).float().mean(),
        }
