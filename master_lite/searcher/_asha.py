"""Asynchronous successive halving (ASHA) for one bracket.

Two variants, both over rung targets ``max(1, ⌊L / d^(R-1-i)⌋)`` (absolute lengths):

* ``PromotionAsha`` — classic ASHA (``stop_once: false``, the ≤0.37 default): trials wait in a rung
  and the best ⌊k/d⌋ of the k results seen so far are promoted, possibly long after they finished.
* ``StoppingAsha`` — ``stop_once: true``: a trial continues iff it ranks in the top
  ``max(1, ⌊k/d⌋)`` when it arrives at a rung, else it is closed at once. With ``time_driven`` this
  is the 0.38 algorithm: rungs are passed by the ``time_metric`` of validation reports and a losing
  (or finished) trial gets ``Stop``.

Metrics are stored so that smaller is better (negated when ``smaller_is_better`` is false).
"""

from __future__ import annotations

import bisect
import math
import numbers
import sys
from typing import Any

from master_lite.searcher._ops import Close, ExitedReason, Operation, Shutdown, Stop, ValidateAfter
from master_lite.searcher._trials import TrialFactory

# What an errored trial is recorded as: the worst possible result (JSON-safe, unlike inf).
WORST_METRIC = sys.float_info.max


def rung_lengths(max_length: int, divisor: float, num_rungs: int) -> list[int]:
    """Absolute length each rung needs: ``max(1, ⌊max_length / divisor^(num_rungs-1-i)⌋)``."""
    return [max(1, int(max_length / divisor ** (num_rungs - 1 - i))) for i in range(num_rungs)]


def initial_trial_count(
    max_trials: int, max_concurrent_trials: int, divisor: float, num_rungs: int
) -> int:
    if max_concurrent_trials > 0:
        return min(max_concurrent_trials, max_trials)
    return max(1, min(int(divisor ** (num_rungs - 1)), max_trials))


class _AshaBase:
    def __init__(
        self,
        factory: TrialFactory,
        *,
        num_rungs: int,
        max_trials: int,
        max_concurrent_trials: int,
        divisor: float,
        max_length: int,
        smaller_is_better: bool,
        op_length: int | None = None,
    ) -> None:
        self._factory = factory
        self.num_rungs = num_rungs
        self.max_trials = max_trials
        self.max_concurrent_trials = max_concurrent_trials
        self.divisor = divisor
        self.smaller_is_better = smaller_is_better
        self.rung_targets = rung_lengths(max_length, divisor, num_rungs)
        self._op_length = op_length  # first op length when it is not the rung-0 target (0.38 form)
        self._trial_rungs: dict[int, int] = {}  # request id -> current rung
        self._awaiting: list[int] = []  # trials with an outstanding ValidateAfter
        self._ended: list[int] = []  # closed or exited: the trial process is gone
        self._early_exits: list[int] = []
        self._invalid_ids: list[int] = []
        self._finished: list[
            int
        ] = []  # valid trials the searcher is done with (closed/stopped/top)

    def _signed(self, metric: float) -> float:
        if (
            not isinstance(metric, numbers.Real)
            or isinstance(metric, bool)
            or not math.isfinite(metric)
        ):
            # A missing, NaN or infinite (diverged) result cannot win anything: -Infinity of
            # a loss is a divergence, not the best trial.
            return WORST_METRIC
        return float(metric) if self.smaller_is_better else -float(metric)

    def _valid_created(self) -> int:
        return len(self._trial_rungs) - len(self._invalid_ids)

    def _create(self) -> list[Operation]:
        create = self._factory.create()
        self._trial_rungs[create.request_id] = 0
        self._awaiting.append(create.request_id)
        length = self._op_length if self._op_length is not None else self.rung_targets[0]
        return [create, ValidateAfter(create.request_id, length)]

    def initial(self) -> list[Operation]:
        ops: list[Operation] = []
        count = initial_trial_count(
            self.max_trials, self.max_concurrent_trials, self.divisor, self.num_rungs
        )
        for _ in range(count):
            ops += self._create()
        return ops

    def done(self) -> bool:
        return (
            all(rid in self._ended for rid in self._trial_rungs)
            and self._valid_created() >= self.max_trials
        )

    def _rung0_count(self) -> int:
        raise NotImplementedError

    def progress(self, trial_progress: dict[int, float]) -> float:
        if self.done():
            return 1.0
        seen = self._rung0_count()
        value = seen / (1.2 * self.max_trials)  # 20% headroom: promotions are still to come
        if seen >= self.max_trials:
            value = max(value, len(self._finished) / self.max_trials)
        return min(1.0, value)

    def _base_state(self) -> dict[str, Any]:
        return {
            "trial_rungs": [[rid, rung] for rid, rung in self._trial_rungs.items()],
            "awaiting": list(self._awaiting),
            "ended": list(self._ended),
            "early_exits": list(self._early_exits),
            "invalid_ids": list(self._invalid_ids),
            "finished": list(self._finished),
        }

    def _load_base_state(self, state: dict[str, Any]) -> None:
        self._trial_rungs = {rid: rung for rid, rung in state["trial_rungs"]}
        self._awaiting = list(state["awaiting"])
        self._ended = list(state["ended"])
        self._early_exits = list(state["early_exits"])
        self._invalid_ids = list(state["invalid_ids"])
        self._finished = list(state["finished"])


class PromotionAsha(_AshaBase):
    """Classic ASHA with promotions (Determined ≤0.37, ``stop_once: false``)."""

    def __init__(self, factory: TrialFactory, **kwargs: Any) -> None:
        super().__init__(factory, **kwargs)
        # Per rung: results as [request_id, metric, promoted], sorted best first.
        self._rung_results: list[list[list[Any]]] = [[] for _ in range(self.num_rungs)]
        self._outstanding = [0] * self.num_rungs
        self._closed_sent: list[int] = []

    def _create(self) -> list[Operation]:
        self._outstanding[0] += 1
        return super()._create()

    def _rung0_count(self) -> int:
        return len(self._rung_results[0])

    def _promotions(self, rung: int, request_id: int, metric: float) -> list[int]:
        results = self._rung_results[rung]
        old_num_promote = int(len(results) / self.divisor)
        num_promote = int((len(results) + 1) / self.divisor)
        # Insert *after* equal values: an earlier result wins a tie.
        index = bisect.bisect_right([entry[1] for entry in results], metric)
        promote_now = index < num_promote
        results.insert(index, [request_id, metric, promote_now])
        if promote_now:
            return [request_id]
        if num_promote != old_num_promote and not results[old_num_promote][2]:
            results[old_num_promote][2] = True
            return [results[old_num_promote][0]]
        return []

    def _record(self, request_id: int, metric: float) -> list[Operation]:
        """A result for ``request_id`` at its current rung: promote, close, create as needed."""
        rung = self._trial_rungs[request_id]
        self._outstanding[rung] -= 1
        ops: list[Operation] = []
        added_work = False
        if rung == self.num_rungs - 1:
            self._finished.append(request_id)
            if request_id not in self._early_exits:
                ops.append(Close(request_id))
                self._closed_sent.append(request_id)
        else:
            for promoted in self._promotions(rung, request_id, metric):
                self._trial_rungs[promoted] = rung + 1
                self._outstanding[rung + 1] += 1
                if promoted in self._early_exits:
                    # A trial that is gone cannot train: it reports the worst value at the next rung.
                    return ops + self._record(promoted, WORST_METRIC)
                # The promoted trial may have finished its op long ago (its process may even have
                # exited): this re-activates it.
                if promoted in self._ended:
                    self._ended.remove(promoted)
                self._awaiting.append(promoted)
                ops.append(ValidateAfter(promoted, self.rung_targets[rung + 1]))
                added_work = True
        if not added_work and self._valid_created() < self.max_trials:
            ops += self._create()
        return ops + self._close_out()

    def _close_out(self) -> list[Operation]:
        """Once every trial has reported at rung 0, close the losers of each settled rung."""
        if len(self._rung_results[0]) < self.max_trials:
            return []
        ops: list[Operation] = []
        for rung, results in enumerate(self._rung_results):
            if self._outstanding[rung] > 0:
                break
            for request_id, _, promoted in results:
                if promoted or request_id in self._closed_sent:
                    continue
                self._closed_sent.append(request_id)
                if request_id not in self._finished:
                    self._finished.append(request_id)
                if request_id not in self._early_exits:
                    ops.append(Close(request_id))
        return ops

    def validation_completed(self, request_id: int, metric: float, length: int) -> list[Operation]:
        if (
            request_id not in self._awaiting
            or length < self.rung_targets[self._trial_rungs[request_id]]
        ):
            return []
        self._awaiting.remove(request_id)
        return self._record(request_id, self._signed(metric))

    def validation_reported(self, request_id: int, metrics: dict) -> list[Operation]:
        return []  # results arrive as completed operations

    def exited_early(self, request_id: int, reason: ExitedReason) -> list[Operation]:
        if request_id not in self._trial_rungs or request_id in self._ended:
            return []
        self._ended.append(request_id)
        self._early_exits.append(request_id)
        self._closed_sent.append(request_id)
        was_training = request_id in self._awaiting
        if was_training:
            self._awaiting.remove(request_id)
        if reason == ExitedReason.INVALID_HP:
            self._invalid_ids.append(request_id)
            top = self._trial_rungs[request_id]
            if was_training:
                self._outstanding[top] -= 1
            for rung in range(top + 1):
                self._rung_results[rung] = [
                    e for e in self._rung_results[rung] if e[0] != request_id
                ]
            return self._create()
        if was_training:
            return self._record(request_id, WORST_METRIC)
        # It already reported here; if it is promoted later it reports the worst value then.
        if request_id not in self._finished and self._trial_rungs[request_id] == self.num_rungs - 1:
            self._finished.append(request_id)
        return self._close_out()

    def closed(self, request_id: int) -> list[Operation]:
        if request_id not in self._trial_rungs or request_id in self._ended:
            return []
        if request_id in self._awaiting:
            # It exited normally without finishing the op it was given: it cannot be ranked.
            return self.exited_early(request_id, ExitedReason.ERRORED)
        # Its process is gone; if it is still waiting in a rung, a later promotion re-activates it
        # (the master resumes it from its latest checkpoint).
        self._ended.append(request_id)
        return []

    def state(self) -> dict[str, Any]:
        return {
            **self._base_state(),
            "rung_results": self._rung_results,
            "outstanding": self._outstanding,
            "closed_sent": self._closed_sent,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._load_base_state(state)
        self._rung_results = [[list(entry) for entry in rung] for rung in state["rung_results"]]
        self._outstanding = list(state["outstanding"])
        self._closed_sent = list(state["closed_sent"])


class StoppingAsha(_AshaBase):
    """ASHA that decides once per rung (``stop_once: true``; with ``time_driven``, 0.38's ASHA).

    ``time_driven``: rungs are passed by validation reports whose ``time_metric`` reaches a rung
    target; losers and top-rung finishers get ``Stop``. Otherwise rungs are passed by completed
    operations and losers get ``Close``.
    """

    def __init__(
        self,
        factory: TrialFactory,
        *,
        time_driven: bool = False,
        metric_name: str = "",
        time_metric: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(factory, **kwargs)
        self.time_driven = time_driven
        self.metric_name = metric_name
        self.time_metric = time_metric
        # Per rung: results as [request_id, metric], sorted best first.
        self._rung_results: list[list[list[Any]]] = [[] for _ in range(self.num_rungs)]
        self._stopped: list[int] = []  # Stop/Close sent by the searcher's decision

    def _rung0_count(self) -> int:
        return len(self._rung_results[0])

    def _insert(self, rung: int, request_id: int, metric: float) -> int:
        results = self._rung_results[rung]
        # Insert *before* equal values: a newcomer wins a tie.
        index = bisect.bisect_left([entry[1] for entry in results], metric)
        results.insert(index, [request_id, metric])
        return index

    def _replenish(self) -> list[Operation]:
        if self._valid_created() < self.max_trials:
            return self._create()
        return []

    def _decide(self, request_id: int, metric: float, reached: float) -> list[Operation]:
        """Walk the trial up every rung whose target ``reached`` covers; stop it where it loses."""
        end = Stop if self.time_driven else Close
        rung = self._trial_rungs[request_id]
        while rung < self.num_rungs and self.rung_targets[rung] <= reached:
            index = self._insert(rung, request_id, metric)
            if rung == self.num_rungs - 1 or index >= max(
                1, int(len(self._rung_results[rung]) / self.divisor)
            ):
                self._stopped.append(request_id)
                self._finished.append(request_id)
                if request_id in self._awaiting:
                    self._awaiting.remove(request_id)
                return [end(request_id)] + self._replenish()
            rung += 1
            self._trial_rungs[request_id] = rung
            if not self.time_driven:
                self._awaiting.append(request_id)
                return [ValidateAfter(request_id, self.rung_targets[rung])]
        return []

    def validation_completed(self, request_id: int, metric: float, length: int) -> list[Operation]:
        if request_id not in self._awaiting or request_id in self._stopped:
            return []
        if self.time_driven:
            # The trial trained its whole (single) op without being stopped: it is done.
            self._awaiting.remove(request_id)
            return [Close(request_id)]
        if length < self.rung_targets[self._trial_rungs[request_id]]:
            return []
        self._awaiting.remove(request_id)
        return self._decide(request_id, self._signed(metric), length)

    def validation_reported(self, request_id: int, metrics: dict) -> list[Operation]:
        if not self.time_driven or request_id not in self._trial_rungs:
            return []
        if request_id in self._stopped or request_id in self._ended:
            return []
        for key in (self.metric_name, self.time_metric):
            value = metrics.get(key)
            # A NaN/Infinity searcher metric (a diverged trial) ranks worst (`_signed`); a
            # time metric must be a finite number to place the trial on a rung.
            if (
                not isinstance(value, numbers.Real)
                or isinstance(value, bool)
                or (key == self.time_metric and not math.isfinite(value))
            ):
                return [
                    Shutdown(
                        failure=True,
                        reason=(
                            f"trial request {request_id} reported validation metrics without a number for "
                            f"{key!r} (got {value!r}); adaptive ASHA needs searcher.metric and searcher.time_metric "
                            "in every validation report"
                        ),
                    )
                ]
        return self._decide(
            request_id, self._signed(metrics[self.metric_name]), float(metrics[self.time_metric])
        )

    def exited_early(self, request_id: int, reason: ExitedReason) -> list[Operation]:
        if request_id not in self._trial_rungs or request_id in self._ended:
            return []
        self._ended.append(request_id)
        self._early_exits.append(request_id)
        if request_id in self._awaiting:
            self._awaiting.remove(request_id)
        if request_id in self._stopped:
            return []  # already decided (and replaced); it merely failed on the way out
        self._stopped.append(request_id)
        if reason == ExitedReason.INVALID_HP:
            self._invalid_ids.append(request_id)
            for rung in range(self.num_rungs):
                self._rung_results[rung] = [
                    e for e in self._rung_results[rung] if e[0] != request_id
                ]
            return self._create()
        rung = self._trial_rungs[request_id]
        if rung < self.num_rungs:
            self._insert(rung, request_id, WORST_METRIC)
        self._finished.append(request_id)
        return self._replenish()

    def closed(self, request_id: int) -> list[Operation]:
        if request_id not in self._trial_rungs or request_id in self._ended:
            return []
        if request_id in self._awaiting and not self.time_driven:
            return self.exited_early(request_id, ExitedReason.ERRORED)
        self._ended.append(request_id)
        if request_id in self._awaiting:
            self._awaiting.remove(request_id)
        if request_id in self._stopped:
            return []
        # Ended on its own (trained its full length without reaching the top rung): free its slot.
        self._stopped.append(request_id)
        self._finished.append(request_id)
        return self._replenish()

    def state(self) -> dict[str, Any]:
        return {**self._base_state(), "rung_results": self._rung_results, "stopped": self._stopped}

    def load_state(self, state: dict[str, Any]) -> None:
        self._load_base_state(state)
        self._rung_results = [[list(entry) for entry in rung] for rung in state["rung_results"]]
        self._stopped = list(state["stopped"])
