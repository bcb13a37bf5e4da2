"""`LRScheduler`: Determined's wrapper that steps a torch scheduler at the right moments."""

from __future__ import annotations

import enum
from typing import Any

import torch


class LRScheduler:
    """Wraps a torch LR scheduler; created by `context.wrap_lr_scheduler()`, not by users.

    The record says when the trainer steps the scheduler; it is kept in
    `context.lr_schedulers` and the scheduler's state is saved in checkpoints.

    Step modes (`LRScheduler.StepMode`):
        STEP_EVERY_EPOCH: after every `frequency`-th epoch ends (epochs counted from the start
            of training).
        STEP_EVERY_BATCH: after every `frequency`-th batch (when `batch_idx + 1` is a multiple
            of `frequency`), whether or not the optimizer stepped on it (gradient aggregation).
        STEP_EVERY_OPTIMIZER_STEP: by `context.step_optimizer`, after every `frequency`-th real
            step of the scheduler's optimizer (counted since `fit` started, not restored from
            a checkpoint).
        MANUAL_STEP: never by Determined; call `scheduler.step()` yourself. Required for
            `ReduceLROnPlateau`, which needs a metric to step.

    Args:
        scheduler: the torch LR scheduler.
        step_mode: when the trainer steps it (above).
        frequency: step every this many epochs, batches or optimizer steps; an int >= 1.

    Raises:
        TypeError: `step_mode` is not an `LRScheduler.StepMode`.
        ValueError: `frequency` is not an int >= 1, or `scheduler` is a `ReduceLROnPlateau`
            and `step_mode` is not `MANUAL_STEP`.
    """

    class StepMode(enum.Enum):
        """When the trainer steps a wrapped LR scheduler (see `LRScheduler`)."""

        STEP_EVERY_EPOCH = 1  # every `frequency` epochs
        STEP_EVERY_BATCH = 2  # every `frequency` batches, ignoring gradient aggregation
        MANUAL_STEP = 3  # never stepped by Determined
        STEP_EVERY_OPTIMIZER_STEP = 4  # every `frequency` real optimizer steps

    def __init__(self, scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1) -> None:
        if not isinstance(step_mode, LRScheduler.StepMode):
            raise TypeError(
                f"wrap_lr_scheduler(step_mode=...): expected det.pytorch.LRScheduler.StepMode, got {step_mode!r}"
            )
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 1:
            raise ValueError(
                f"wrap_lr_scheduler(frequency=...): expected an int >= 1, got {frequency!r}"
            )
        if (
            isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
            and step_mode is not LRScheduler.StepMode.MANUAL_STEP
        ):
            raise ValueError(
                "ReduceLROnPlateau needs a metric to step, so Determined cannot step it: wrap it with "
                "step_mode=LRScheduler.StepMode.MANUAL_STEP and call scheduler.step(metric) yourself"
            )
        self._scheduler = scheduler
        self._step_mode = step_mode
        self._frequency = frequency

    @property
    def scheduler(self) -> Any:
        """The wrapped torch LR scheduler."""
        return self._scheduler

    @property
    def step_mode(self) -> LRScheduler.StepMode:
        """When the trainer steps the scheduler."""
        return self._step_mode

    @property
    def frequency(self) -> int:
        """Step every this many epochs, batches or optimizer steps (by `step_mode`)."""
        return self._frequency

    def step(self, *args: Any, **kwargs: Any) -> None:
        """Step the wrapped scheduler now.

        Args:
            *args: passed to the scheduler's `step()`.
            **kwargs: passed to the scheduler's `step()`.
        """
        self._scheduler.step(*args, **kwargs)

    def get_last_lr(self) -> Any:
        """The learning rates the scheduler computed last.

        Returns:
            The scheduler's `get_last_lr()`: one learning rate per parameter group.
        """
        return self._scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state, as saved in checkpoints.

        Returns:
            The scheduler's `state_dict()`.
        """
        return self._scheduler.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the scheduler's state.

        Args:
            state_dict: a state from `state_dict()`.
        """
        self._scheduler.load_state_dict(state_dict)
