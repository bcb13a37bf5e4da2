"""Operations a searcher emits, the reasons a trial can end early, and the SearchMethod face.

Operations carry *absolute* lengths (the ≤0.37 master-driven form): ``ValidateAfter(7, 100)`` means
"train request 7 until it has trained 100 units in total, then validate", never "100 more".
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


@dataclasses.dataclass(frozen=True)
class Create:
    """Start a new trial with these hyperparameters (its first ValidateAfter follows in the same list)."""

    request_id: int
    hparams: dict
    trial_seed: int
    checkpoint: str | None = None


@dataclasses.dataclass(frozen=True)
class ValidateAfter:
    """Train the trial until it has trained ``length`` units in total, then validate."""

    request_id: int
    length: int


@dataclasses.dataclass(frozen=True)
class Close:
    """No more operations for this trial: it exits once its current operation is done."""

    request_id: int


@dataclasses.dataclass(frozen=True)
class Stop:
    """Early-stop the trial now (the master preempts it; it ends as STOPPING_COMPLETED)."""

    request_id: int


@dataclasses.dataclass(frozen=True)
class Shutdown:
    """The search is over. ``failure`` marks a search that cannot go on (experiment -> ERROR);
    ``reason`` then says why, in words meant for the user."""

    failure: bool = False
    reason: str = ""


Operation = Create | ValidateAfter | Close | Stop | Shutdown


class ExitedReason(str, enum.Enum):
    """Why a trial ended before the searcher closed it."""

    INVALID_HP = "INVALID_HP"  # the trial raised det.InvalidHP: its hparams do not count
    ERRORED = "ERRORED"  # it failed past its restart budget
    USER_CANCELED = "USER_CANCELED"  # a person killed it


def operation_to_json(op: Operation) -> dict[str, Any]:
    """``{"type": "ValidateAfter", "request_id": 3, "length": 100}`` — for storing pending ops."""
    return {"type": type(op).__name__, **dataclasses.asdict(op)}


_OPERATION_TYPES = {cls.__name__: cls for cls in (Create, ValidateAfter, Close, Stop, Shutdown)}


def operation_from_json(data: dict[str, Any]) -> Operation:
    fields = dict(data)
    kind = fields.pop("type", None)
    if kind not in _OPERATION_TYPES:
        raise ValueError(
            f"operation type {kind!r} is unknown (expected one of {sorted(_OPERATION_TYPES)})"
        )
    return _OPERATION_TYPES[kind](**fields)


class SearchMethod:
    """An event-driven searcher: every ``on_*`` call returns the operations it causes, in order.

    Implementations are pure and deterministic: the same config (including its seed) and the same
    sequence of events always give the same operations.
    """

    def initial_operations(self) -> list[Operation]:
        raise NotImplementedError

    def on_trial_created(self, request_id: int) -> list[Operation]:
        raise NotImplementedError

    def on_validation_completed(
        self, request_id: int, metric: float, length: int
    ) -> list[Operation]:
        raise NotImplementedError

    def on_validation_reported(self, request_id: int, metrics: dict) -> list[Operation]:
        raise NotImplementedError

    def on_trial_exited_early(self, request_id: int, reason: ExitedReason) -> list[Operation]:
        raise NotImplementedError

    def on_trial_closed(self, request_id: int) -> list[Operation]:
        raise NotImplementedError

    def progress(self, trial_progress: dict[int, float]) -> float:
        raise NotImplementedError

    def snapshot(self) -> dict:
        raise NotImplementedError
