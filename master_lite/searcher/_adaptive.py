"""Adaptive ASHA: split the trial budget over brackets of different aggressiveness, and run one
ASHA per bracket behind a tournament that routes each trial's events to the bracket that made it."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from master_lite.searcher._ops import Create, ExitedReason, Operation

MODES = ("aggressive", "standard", "conservative")


def _floor_log(value: int, divisor: float) -> int:
    """⌊log(value)/log(divisor)⌋ computed exactly (floats get e.g. log(64)/log(4) wrong by an ulp)."""
    base = Fraction(divisor)
    power, exponent = base, 0
    while power <= value:
        exponent += 1
        power *= base
    return exponent


def max_rungs_for(max_rungs: int, max_length: int, max_trials: int, divisor: float) -> int:
    """``min(max_rungs, ⌊log_d L⌋ + 1, ⌊log_d max_trials⌋ + 1)``."""
    return min(max_rungs, _floor_log(max_length, divisor) + 1, _floor_log(max_trials, divisor) + 1)


def bracket_rungs(
    mode: str,
    max_rungs: int,
    max_length: int,
    max_trials: int,
    divisor: float,
    explicit: Sequence[int] = (),
) -> list[int]:
    """Rungs per bracket, most early-stopping (most rungs) first."""
    if explicit:
        rungs = list(explicit)
    else:
        top = max_rungs_for(max_rungs, max_length, max_trials, divisor)
        if mode == "aggressive":
            rungs = [top]
        elif mode == "standard":
            rungs = list(range((top - 1) // 2 + 1, top + 1))
        elif mode == "conservative":
            rungs = list(range(1, top + 1))
        else:
            raise ValueError(
                f"searcher.mode: {mode!r} is not a mode (use one of {', '.join(MODES)})"
            )
    return sorted(rungs, reverse=True)


def bracket_trials(rungs: Sequence[int], max_trials: int, divisor: float) -> list[int]:
    """Trials per bracket ∝ d^(R-1)/R, at least 1 each; what rounding leaves goes to the first."""
    weights = [Fraction(divisor) ** (r - 1) / r for r in rungs]
    total = sum(weights)
    trials = [max(1, int(w / total * max_trials)) for w in weights]
    leftover = max_trials - sum(trials)
    if leftover > 0:
        trials[0] += leftover
    return trials


def bracket_concurrency(
    trials: Sequence[int], max_concurrent_trials: int, divisor: float
) -> list[int]:
    if max_concurrent_trials == 0:
        return [max(trials[-1], int(divisor))] * len(trials)
    budget = max(max_concurrent_trials, len(trials))
    share, remainder = divmod(budget, len(trials))
    return [share + (1 if i < remainder else 0) for i in range(len(trials))]


class Tournament:
    """Several engines (brackets) behind one face. Events go to the bracket that created the trial;
    request ids stay globally sequential because every bracket draws from the same TrialFactory."""

    def __init__(self, engines: list[Any]) -> None:
        self.engines = engines
        self._owner: dict[int, int] = {}

    def _claim(self, bracket: int, ops: list[Operation]) -> list[Operation]:
        for op in ops:
            if isinstance(op, Create):
                self._owner[op.request_id] = bracket
        return ops

    def bracket_of(self, request_id: int) -> int:
        return self._owner[request_id]

    def initial(self) -> list[Operation]:
        ops: list[Operation] = []
        for index, engine in enumerate(self.engines):
            ops += self._claim(index, engine.initial())
        return ops

    def _route(self, request_id: int, method: str, *args: Any) -> list[Operation]:
        if request_id not in self._owner:
            return []  # not a trial of this search (or a stale event): nothing to do
        index = self._owner[request_id]
        return self._claim(index, getattr(self.engines[index], method)(request_id, *args))

    def validation_completed(self, request_id: int, metric: float, length: int) -> list[Operation]:
        return self._route(request_id, "validation_completed", metric, length)

    def validation_reported(self, request_id: int, metrics: dict) -> list[Operation]:
        return self._route(request_id, "validation_reported", metrics)

    def exited_early(self, request_id: int, reason: ExitedReason) -> list[Operation]:
        return self._route(request_id, "exited_early", reason)

    def closed(self, request_id: int) -> list[Operation]:
        return self._route(request_id, "closed")

    def done(self) -> bool:
        return all(engine.done() for engine in self.engines)

    def progress(self, trial_progress: dict[int, float]) -> float:
        return sum(engine.progress(trial_progress) for engine in self.engines) / len(self.engines)

    def state(self) -> dict[str, Any]:
        return {
            "owner": [[rid, b] for rid, b in self._owner.items()],
            "engines": [engine.state() for engine in self.engines],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._owner = {rid: b for rid, b in state["owner"]}
        for engine, engine_state in zip(self.engines, state["engines"], strict=False):
            engine.load_state(engine_state)
