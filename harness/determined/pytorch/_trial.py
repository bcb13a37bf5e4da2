"""`PyTorchTrial`: the class users subclass; Determined's `Trainer` drives it."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._data import DataLoader, data_length
from determined.pytorch._reducer import Reducer


class LegacyTrial:
    """Base of the Trial APIs (PyTorchTrial, TFKerasTrial): a class the harness instantiates."""

    trial_context_class: Any = None
    trial_controller_class: Any = None

    def __init__(self, context: Any) -> None:
        pass


class PyTorchTrial(LegacyTrial):
    """Subclass this and implement at least `__init__`, `train_batch`, the two data loader builders
    and one of `evaluate_batch` / `evaluate_full_dataset`."""

    trial_context_class = PyTorchTrialContext

    def __init__(self, context: PyTorchTrialContext) -> None:  # noqa: B027 - users override
        pass

    def train_batch(
        self, batch: Any, epoch_idx: int, batch_idx: int
    ) -> torch.Tensor | dict[str, Any]:
        """Forward, `context.backward(loss)`, `context.step_optimizer(opt)`; return metrics (or the loss)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement train_batch(batch, epoch_idx, batch_idx)"
        )

    def build_training_data_loader(self) -> DataLoader:
        raise NotImplementedError(
            f"{type(self).__name__} must implement build_training_data_loader()"
        )

    def build_validation_data_loader(self) -> DataLoader:
        raise NotImplementedError(
            f"{type(self).__name__} must implement build_validation_data_loader()"
        )

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        return {}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        """Validation metrics of one batch, reduced over batches with `evaluation_reducer()`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_batch(batch, batch_idx) or "
            "evaluate_full_dataset(data_loader)"
        )

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        return Reducer.AVG

    def evaluate_full_dataset(self, data_loader: torch.utils.data.DataLoader) -> dict[str, Any]:
        """Validation metrics over the whole dataset; runs on the chief only."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_batch(batch, batch_idx) or "
            "evaluate_full_dataset(data_loader)"
        )

    def get_batch_length(self, batch: Any) -> int:
        return data_length(batch)


def _overrides(trial: PyTorchTrial, method: str) -> bool:
    return getattr(type(trial), method) is not getattr(PyTorchTrial, method)


def reset_parameters(model: torch.nn.Module) -> None:
    """Deprecated (Determined 0.13): call `reset_parameters()` of every submodule of `model`
    that has one. Modules reset themselves in their own `__init__`; this is kept for old code."""
    warnings.warn(
        "det.pytorch.reset_parameters() is deprecated: modules reset their parameters in __init__",
        FutureWarning,
        stacklevel=2,
    )
    for module in model.modules():
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()
