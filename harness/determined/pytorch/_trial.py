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
        """Build the models, optimizers and LR schedulers, registering them with `context.wrap_*`.

        Args:
            context: the trial's `PyTorchTrialContext`; keep it (e.g. as `self.context`).
        """
        pass

    def train_batch(
        self, batch: Any, epoch_idx: int, batch_idx: int
    ) -> torch.Tensor | dict[str, Any]:
        """Train on one batch: forward, `context.backward(loss)`, `context.step_optimizer(opt)`.

        Args:
            batch: the next batch of the training data loader, already moved to
                `context.device` (unless `experimental.disable_auto_to_device()` was called).
            epoch_idx: the epoch this batch belongs to, counted from 0.
            batch_idx: the batch's index counted from the start of training (not of the
                epoch), from 0; it goes on counting after a resume from a checkpoint.

        Returns:
            A dict of metric name to value (tensor, number or array) or the loss tensor alone
            (reported as `loss`). The training metrics are these values averaged over the
            batches of a reporting span and across processes.

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement train_batch(batch, epoch_idx, batch_idx)"
        )

    def build_training_data_loader(self) -> DataLoader:
        """Build the training data; `Trainer.fit()` calls it once, before training.

        Returns:
            A `det.pytorch.DataLoader` (Determined repeats it, shards it across processes and, on
            resume, starts it after the batches already trained), or a plain
            `torch.utils.data.DataLoader` (repeated and fast-forwarded on resume by reading and
            dropping batches, but not sharded). An epoch is one pass over it (the chief's count of
            batches). Use `context.get_per_slot_batch_size()` as its batch size.

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement build_training_data_loader()"
        )

    def build_validation_data_loader(self) -> DataLoader:
        """Build the validation data; `Trainer.fit()` calls it once, before training.

        Returns:
            A `det.pytorch.DataLoader` (sharded across processes for `evaluate_batch`, whole for
            `evaluate_full_dataset`), or a plain `torch.utils.data.DataLoader` (used as it is, on
            every process).

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement build_validation_data_loader()"
        )

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        """The trial's callbacks; `Trainer.fit()` calls it once, before training.

        Returns:
            A dict of name to `det.pytorch.PyTorchCallback`; each callback's `state_dict()` is
            saved in checkpoints under its name. An empty dict by default.
        """
        return {}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        """Validation metrics of one batch, reduced over batches with `evaluation_reducer()`.

        Called on every process for each batch of its shard of the validation data, with the
        models in eval mode and under `torch.no_grad()`. When a trial overrides both this and
        `evaluate_full_dataset`, this one is used. Older trials may define
        `evaluate_batch(self, batch)` without `batch_idx`.

        Args:
            batch: a batch of the validation data loader, already moved to `context.device`
                (unless `experimental.disable_auto_to_device()` was called).
            batch_idx: the batch's index within this process's validation pass, from 0.

        Returns:
            A dict of metric name to value (tensor, number or array).

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_batch(batch, batch_idx) or "
            "evaluate_full_dataset(data_loader)"
        )

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        """How the metrics of `evaluate_batch` are combined over batches and processes.

        `Reducer.AVG` averages over each process's batches, then across processes weighted by
        their number of batches; SUM, MAX and MIN do what they say at both levels. Training
        metrics are always averaged, whatever this returns.

        Returns:
            One `det.pytorch.Reducer` for every metric, or a dict with a `Reducer` for each metric
            name that `evaluate_batch` returns. `Reducer.AVG` by default.
        """
        return Reducer.AVG

    def evaluate_full_dataset(self, data_loader: torch.utils.data.DataLoader) -> dict[str, Any]:
        """Validation metrics over the whole dataset; runs on the chief only.

        Used when `evaluate_batch` is not overridden. The chief's result is broadcast to the
        other processes; the models are in eval mode and it runs under `torch.no_grad()`.
        Reducers wrapped with `context.wrap_reducer` are not applied on this path.

        Args:
            data_loader: a torch DataLoader over all of the validation data (not sharded),
                built from what `build_validation_data_loader` returned. Its batches are not
                moved to `context.device` for you.

        Returns:
            A dict of metric name to value.

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_batch(batch, batch_idx) or "
            "evaluate_full_dataset(data_loader)"
        )

    def get_batch_length(self, batch: Any) -> int:
        """The number of records in a batch.

        Kept for Determined compatibility: the trainer here counts batches, not records, and does
        not call it.

        Args:
            batch: a batch of the data loader.

        Returns:
            The length of its first tensor or array (looking into the first value of a dict or
            the first item of a list or tuple, recursively).

        Raises:
            TypeError: no tensor or array to measure was found.
        """
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
