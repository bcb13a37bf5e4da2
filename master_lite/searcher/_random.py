"""Random search (and single, which is random with one trial): a fixed budget of independent trials."""

from __future__ import annotations

from typing import Any

from master_lite.searcher._ops import Close, ExitedReason, Operation, ValidateAfter
from master_lite.searcher._trials import TrialFactory


class RandomEngine:
    """Keeps up to ``max_concurrent_trials`` trials running until ``max_trials`` have been run.

    Each trial gets one ``ValidateAfter(max_length)``; when it completes the trial is closed, and
    every trial that ends (closed or exited early) frees a slot for the next one. InvalidHP trials
    do not count against ``max_trials`` (``replace_invalid``), so a replacement is drawn.
    """

    replace_invalid = True

    def __init__(
        self, factory: TrialFactory, *, max_trials: int, max_concurrent_trials: int, length: int
    ) -> None:
        self._factory = factory
        self.max_trials = max_trials
        self.max_concurrent_trials = max_concurrent_trials
        self.length = length
        self.rung_targets = [length]
        self._created = 0
        self._invalid = 0
        self._active: list[int] = []  # created, not yet ended, in creation order
        self._closing: list[int] = []  # Close sent, waiting for the trial to end
        self._ended: list[int] = []
        self._invalid_ids: list[int] = []

    # -- what may still be created -------------------------------------------------------------
    def _can_create_more(self) -> bool:
        return self._created - self._invalid < self.max_trials

    def _next_hparams(self) -> dict[str, Any] | None:
        return None  # sample

    def _fill(self) -> list[Operation]:
        ops: list[Operation] = []
        while self._can_create_more() and (
            self.max_concurrent_trials <= 0 or len(self._active) < self.max_concurrent_trials
        ):
            create = self._factory.create(self._next_hparams())
            self._created += 1
            self._active.append(create.request_id)
            ops += [create, ValidateAfter(create.request_id, self.length)]
        return ops

    # -- events --------------------------------------------------------------------------------
    def initial(self) -> list[Operation]:
        return self._fill()

    def validation_completed(self, request_id: int, metric: float, length: int) -> list[Operation]:
        if request_id not in self._active or request_id in self._closing or length < self.length:
            return []
        self._closing.append(request_id)
        return [Close(request_id)]

    def validation_reported(self, request_id: int, metrics: dict) -> list[Operation]:
        return []  # random/grid ignore validation contents

    def exited_early(self, request_id: int, reason: ExitedReason) -> list[Operation]:
        if request_id not in self._active:
            return []
        if reason == ExitedReason.INVALID_HP:
            self._invalid_ids.append(request_id)
            if self.replace_invalid:
                self._invalid += 1
        return self._end(request_id)

    def closed(self, request_id: int) -> list[Operation]:
        if request_id not in self._active:
            return []
        return self._end(request_id)

    def _end(self, request_id: int) -> list[Operation]:
        self._active.remove(request_id)
        if request_id in self._closing:
            self._closing.remove(request_id)
        self._ended.append(request_id)
        return self._fill()

    def done(self) -> bool:
        return not self._active and not self._can_create_more()

    def _total_trials(self) -> int:
        return self.max_trials

    def progress(self, trial_progress: dict[int, float]) -> float:
        if self.done():
            return 1.0
        finished = sum(1.0 for rid in self._ended if rid not in self._invalid_ids)
        running = sum(
            min(1.0, max(0.0, float(trial_progress.get(rid, 0.0)))) for rid in self._active
        )
        return min(1.0, (finished + running) / max(1, self._total_trials()))

    # -- snapshot ------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "created": self._created,
            "invalid": self._invalid,
            "active": list(self._active),
            "closing": list(self._closing),
            "ended": list(self._ended),
            "invalid_ids": list(self._invalid_ids),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._created = state["created"]
        self._invalid = state["invalid"]
        self._active = list(state["active"])
        self._closing = list(state["closing"])
        self._ended = list(state["ended"])
        self._invalid_ids = list(state["invalid_ids"])
