"""A simulated cluster driving the pure scheduling policy (`decide`), tick by tick.

Each trial needs `work` ticks of running. A preempted trial checkpoints and exits one tick
later (its slots stay held meanwhile), loses nothing it trained, and waits again as a new
request (new arrival order), as a rebalanced trial does on the master.
"""

from __future__ import annotations

import dataclasses

from master_lite.scheduler import Holding, Policy, Request, decide


@dataclasses.dataclass
class Trial:
    key: str
    user: str
    experiment_id: int
    work: int
    slots: int = 1
    priority: int = 42
    weight: float = 1.0
    submit: int = 0
    order: int = 0
    started: int | None = None
    stopping_at: int | None = None
    done: int = 0
    finished: int | None = None
    preemptions: int = 0
    first_start: int | None = None


@dataclasses.dataclass
class Simulation:
    slots: int
    policy: Policy
    trials: list[Trial]
    tick: int = 0
    usage: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # user -> per tick
    preempted_ages: list[int] = dataclasses.field(default_factory=list)
    decisions: int = 0

    def __post_init__(self) -> None:
        self._counter = 0
        self.last_served: dict[str, float] = {}
        for trial in sorted(self.trials, key=lambda t: t.submit):
            trial.order = self._next()

    def _next(self) -> int:
        self._counter += 1
        return self._counter

    def run(self, until: int) -> None:
        by_key = {t.key: t for t in self.trials}
        while self.tick < until and any(t.finished is None for t in self.trials):
            now = self.tick
            for t in self.trials:  # preempted runs exit one tick after being asked
                if t.stopping_at is not None and now > t.stopping_at:
                    t.started, t.stopping_at = None, None
                    t.order = self._next()
            live = [t for t in self.trials if t.started is not None]
            holdings = [
                Holding(
                    key=t.key,
                    user=t.user,
                    experiment_id=t.experiment_id,
                    slots=t.slots,
                    started=float(t.started),  # type: ignore[arg-type]
                    priority=t.priority,
                    weight=t.weight,
                    order=t.order,
                    stopping=t.stopping_at is not None,
                )
                for t in live
            ]
            requests = [
                Request(
                    key=t.key,
                    user=t.user,
                    experiment_id=t.experiment_id,
                    slots=t.slots,
                    order=t.order,
                    priority=t.priority,
                    weight=t.weight,
                )
                for t in self.trials
                if t.started is None and t.finished is None and t.submit <= now
            ]
            decision = decide(
                {"default": self.slots},
                holdings,
                requests,
                self.policy,
                float(now),
                self.last_served,
            )
            self.decisions += 1
            assert sum(h.slots for h in holdings) <= self.slots
            for key in decision.preempt:
                t = by_key[key]
                self.preempted_ages.append(now - t.started)  # type: ignore[operator]
                t.stopping_at = now
                t.preemptions += 1
            for key in decision.grants:
                t = by_key[key]
                t.started = now
                t.first_start = now if t.first_start is None else t.first_start
                self.last_served[t.user] = float(now)
            held = sum(t.slots for t in self.trials if t.started is not None)
            assert held <= self.slots, f"tick {now}: {held} slots held of {self.slots}"
            for t in self.trials:  # one tick of running
                if t.started is not None:
                    row = self.usage.setdefault(t.user, [])
                    row.extend([0] * (now + 1 - len(row)))
                    row[now] += t.slots
                    if t.stopping_at is None:
                        t.done += 1
                        if t.done >= t.work:
                            t.finished, t.started = now, None
            self.tick += 1

    def slot_ticks(self, user: str, start: int, end: int) -> int:
        row = self.usage.get(user, [])
        return sum(row[start:end])
