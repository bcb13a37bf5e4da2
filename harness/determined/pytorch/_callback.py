"""`PyTorchCallback`: hooks into the training loop, returned by `PyTorchTrial.build_callbacks()`."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any


class PyTorchCallback:
    """Override the hooks you need; every default does nothing.

    Callbacks run in the order of the dict `build_callbacks()` returns, on every rank.
    `state_dict()`/`load_state_dict()` let a callback keep state across checkpoints.
    """

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: str | None) -> None:
        """After the checkpoint (if any) was loaded, before training starts."""

    def on_trial_shutdown(self) -> None:
        """When `Trainer.fit` ends, however it ends."""

    def on_training_start(self) -> None:
        """Before the first training batch of this `fit` call."""

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        """Before the first batch of an epoch."""

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        """After the last batch of an epoch."""

    def on_training_workload_end(
        self, avg_metrics: dict[str, Any], batch_metrics: list[dict[str, Any]]
    ) -> None:
        """After the training metrics since the last boundary were aggregated (and reported)."""

    def on_validation_start(self) -> None:
        """Before validation (the model is already in eval mode)."""

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        """After validation, with the reduced validation metrics."""

    def on_validation_epoch_start(self) -> None:
        """Before the first validation batch."""

    def on_validation_epoch_end(self, outputs: list[Any]) -> None:
        """After the last validation batch, with the per-batch outputs of this rank."""

    def on_checkpoint_load_start(self, checkpoint: dict[str, Any]) -> None:
        """With the loaded `state_dict.pth` dict, before the models etc. are restored from it."""

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None:
        """With the dict about to be saved as `state_dict.pth` (you may add entries)."""

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        """After the checkpoint files were written into `checkpoint_dir`."""

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        """After the checkpoint was stored and reported."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Deprecated: use on_checkpoint_write_end."""

    def state_dict(self) -> dict[str, Any]:
        """What this callback keeps in a checkpoint (default: nothing)."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what `state_dict()` returned, when a checkpoint is loaded."""


class ClipGradsL2Norm(PyTorchCallback):
    """Deprecated (Determined 0.13): clips the gradients' L2 norm to `clip_value` before each
    optimizer step. Use `context.step_optimizer(optimizer, clip_grads=...)` instead."""

    def __init__(self, clip_value: float) -> None:
        warnings.warn(
            "ClipGradsL2Norm is deprecated: pass clip_grads=lambda params: "
            "torch.nn.utils.clip_grad_norm_(params, value) to context.step_optimizer",
            FutureWarning,
            stacklevel=2,
        )
        self._clip_value = clip_value

    def on_before_optimizer_step(self, parameters: Iterable[Any]) -> None:
        """Clip the gradients of `parameters` (called by `step_optimizer`)."""
        import torch

        torch.nn.utils.clip_grad_norm_(list(parameters), self._clip_value)


class ClipGradsL2Value(PyTorchCallback):
    """Deprecated (Determined 0.13): clips every gradient value to `[-clip_value, clip_value]`
    before each optimizer step. Use `context.step_optimizer(optimizer, clip_grads=...)` instead."""

    def __init__(self, clip_value: float) -> None:
        warnings.warn(
            "ClipGradsL2Value is deprecated: pass clip_grads=lambda params: "
            "torch.nn.utils.clip_grad_value_(params, value) to context.step_optimizer",
            FutureWarning,
            stacklevel=2,
        )
        self._clip_value = clip_value

    def on_before_optimizer_step(self, parameters: Iterable[Any]) -> None:
        """Clip the gradients of `parameters` (called by `step_optimizer`)."""
        import torch

        torch.nn.utils.clip_grad_value_(list(parameters), self._clip_value)
