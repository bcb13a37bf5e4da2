"""`LRScheduler`: Determined's wrapper that steps a torch scheduler at the right moments."""

from __future__ import annotations

import enum
from typing import Any

import torch


class LRScheduler:
    """Wraps a torch LR scheduler; created by `context.wrap_lr_scheduler()`, not by users."""

    class StepMode(enum.Enum):
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
        return self._scheduler

    @property
    def step_mode(self) -> LRScheduler.StepMode:
        return self._step_mode

    @property
    def frequency(self) -> int:
        return self._frequency

    def step(self, *args: Any, **kwargs: Any) -> None:
        self._scheduler.step(*args, **kwargs)

    def get_last_lr(self) -> Any:
        return self._scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        return self._scheduler.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._scheduler.load_state_dict(state_dict)
