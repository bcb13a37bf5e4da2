"""Drive a searcher to the end against a metric function, as a cluster with unlimited slots would.

Every running trial trains at one unit per tick; the next event is the trial that reaches its next
target first (ties: the lower request id). That interleaving is fixed, so a simulation is as
deterministic as the searcher itself.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

from master_lite.searcher._factory import _Searcher, make_searcher
from master_lite.searcher._ops import Close, Create, Operation, Shutdown, Stop, ValidateAfter

MetricFn = Callable[[int, dict[str, Any], int], float]


@dataclasses.dataclass(frozen=True)
class SimulatedTrial:
    request_id: int
    hparams: dict[str, Any]
    trial_seed: int
    bracket: int
    lengths: list[int]  # the length reached at each validation the searcher acted on
    trained: int  # total length this trial trained
    state: str  # "closed" (ran out of operations) or "stopped" (early-stopped with Stop)


@dataclasses.dataclass(frozen=True)
class RungSummary:
    index: int
    length: int
    trials: int  # trials of this bracket that trained at least `length`


@dataclasses.dataclass(frozen=True)
class BracketSummary:
    index: int
    num_rungs: int
    max_trials: int
    max_concurrent_trials: int
    rungs: list[RungSummary]


@dataclasses.dataclass(frozen=True)
class Simulation:
    trials: list[SimulatedTrial]
    total_length: int  # the budget: every trial's trained length, summed
    brackets: list[BracketSummary]
    unit: str | None
    shutdown: Shutdown


def default_metric(seed: int) -> MetricFn:
    """A fixed pseudo-random quality per trial that improves a little with training."""

    def metric(request_id: int, hparams: dict[str, Any], length: int) -> float:
        quality = random.Random(f"{seed}/{request_id}").random()
        return quality + 1.0 / (1 + length)

    return metric


class _Trial:
    def __init__(self, create: Create, bracket: int) -> None:
        self.create = create
        self.bracket = bracket
        self.trained = 0
        self.target: int | None = None
        self.busy_until = 0
        self.lengths: list[int] = []
        self.closing = False
        self.stopped = False
        self.ended = False


class _Simulator:
    def __init__(self, config: dict[str, Any], metric: MetricFn | None) -> None:
        self.searcher: _Searcher = make_searcher(config)
        self.plan = self.searcher.plan
        seed = (config.get("reproducibility") or {}).get("experiment_seed") or 0
        self.metric = metric or default_metric(seed)
        self.trials: dict[int, _Trial] = {}
        self.clock = 0
        self.shutdown: Shutdown | None = None
        targets = sorted({t for engine in self.searcher.engines for t in engine.rung_targets})
        self.report_points = targets  # where a 0.38-style trial reports validations

    def _next_stop(self, trial: _Trial) -> int:
        assert trial.target is not None
        if self.plan.time_driven:
            for point in self.report_points:
                if trial.trained < point <= trial.target:
                    return point
        return trial.target

    def _schedule(self, trial: _Trial) -> None:
        trial.busy_until = self.clock + max(0, self._next_stop(trial) - trial.trained)

    def _end(self, trial: _Trial) -> list[Operation]:
        trial.ended = True
        trial.target = None
        return self.searcher.on_trial_closed(trial.create.request_id)

    def apply(self, ops: list[Operation]) -> None:
        queue = list(ops)
        while queue:
            op = queue.pop(0)
            if isinstance(op, Shutdown):
                self.shutdown = op
            elif isinstance(op, Create):
                self.trials[op.request_id] = _Trial(op, self.searcher.bracket_of(op.request_id))
                queue += self.searcher.on_trial_created(op.request_id)
            elif isinstance(op, ValidateAfter):
                trial = self.trials[op.request_id]
                trial.target = op.length
                self._schedule(trial)
            elif isinstance(op, Close):
                trial = self.trials[op.request_id]
                trial.closing = True
                if trial.target is None and not trial.ended:
                    queue += self._end(trial)
            elif isinstance(op, Stop):
                trial = self.trials[op.request_id]
                trial.stopped = True
                if not trial.ended:
                    if not trial.lengths or trial.lengths[-1] != trial.trained:
                        trial.lengths.append(trial.trained)
                    queue += self._end(trial)

    def step(self) -> bool:
        running = [t for t in self.trials.values() if t.target is not None and not t.ended]
        if not running:
            return False
        trial = min(running, key=lambda t: (t.busy_until, t.create.request_id))
        self.clock = trial.busy_until
        assert trial.target is not None
        trial.trained = self._next_stop(trial)
        rid, hparams, reached = trial.create.request_id, trial.create.hparams, trial.trained
        value = self.metric(rid, hparams, reached)
        unit_key = self.plan.time_metric if self.plan.time_driven else (self.plan.unit or "length")
        ops = self.searcher.on_validation_reported(
            rid, {self.plan.metric or "metric": value, unit_key: reached}
        )
        if reached >= trial.target:
            trial.target = None
            trial.lengths.append(reached)
            ops += self.searcher.on_validation_completed(rid, value, reached)
        else:
            self._schedule(trial)
        self.apply(ops)
        return True

    def run(self) -> Simulation:
        self.apply(self.searcher.initial_operations())
        while self.shutdown is None:
            if not self.step():
                raise RuntimeError(
                    "searcher stalled: no trial has work left but no Shutdown was emitted "
                    f"(trials: {sorted(self.trials)})"
                )
        return self._result()

    def _result(self) -> Simulation:
        trials = [
            SimulatedTrial(
                request_id=t.create.request_id,
                hparams=t.create.hparams,
                trial_seed=t.create.trial_seed,
                bracket=t.bracket,
                lengths=list(t.lengths),
                trained=t.trained,
                state="stopped" if t.stopped else "closed",
            )
            for t in sorted(self.trials.values(), key=lambda t: t.create.request_id)
        ]
        brackets = []
        for index, engine in enumerate(self.searcher.engines):
            mine = [t for t in trials if t.bracket == index]
            rungs = [
                RungSummary(i, length, sum(1 for t in mine if t.trained >= length))
                for i, length in enumerate(engine.rung_targets)
            ]
            brackets.append(
                BracketSummary(
                    index=index,
                    num_rungs=len(engine.rung_targets),
                    max_trials=engine.max_trials,
                    max_concurrent_trials=engine.max_concurrent_trials,
                    rungs=rungs,
                )
            )
        assert self.shutdown is not None
        return Simulation(
            trials=trials,
            total_length=sum(t.trained for t in trials),
            brackets=brackets,
            unit=self.plan.unit,
            shutdown=self.shutdown,
        )


def simulate(config: dict[str, Any], *, metric: MetricFn | None = None) -> Simulation:
    """Run the config's searcher to its Shutdown with ``metric(request_id, hparams, length)``
    (default: a seeded pseudo-random value per trial) and return what happened."""
    return _Simulator(config, metric).run()
