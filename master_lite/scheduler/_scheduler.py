"""Slot accounting and the order in which allocation requests are granted. Pure logic.

Rule: requests are considered in (priority, arrival) order — smaller priority first — and are
gang-allocated (all their slots at once or nothing). When a request does not fit because too few
slots are free, it *reserves* the head of the line: no request behind it is granted until it
starts. So a waiting 2-slot request is never starved by a stream of 1-slot ones (the cost: slots
can stay idle while it waits for running trials to finish — no backfill, as we have no runtime
estimates to backfill safely). Requests that can never fit (more slots than exist) or that wait
only for their own experiment's `max_slots` do not reserve, since waiting on them would block
everyone for nothing. `slots == 0` requests are granted at once with no slot.
"""

from __future__ import annotations

import dataclasses
import itertools

DEFAULT_PRIORITY = 42


@dataclasses.dataclass
class AllocationRequest:
    allocation_key: str  # caller's handle (the master uses "trial-<id>")
    experiment_id: int
    slots: int
    priority: int = DEFAULT_PRIORITY
    max_slots: int | None = None  # the experiment's resources.max_slots
    order: int = 0  # set by the scheduler: arrival order


@dataclasses.dataclass(frozen=True)
class Grant:
    request: AllocationRequest
    slot_ids: tuple[int, ...]


class Scheduler:
    def __init__(self, slot_ids: list[int]) -> None:
        self.slot_ids = list(slot_ids)
        self._pending: dict[str, AllocationRequest] = {}
        self._granted: dict[str, Grant] = {}
        self._counter = itertools.count()

    @property
    def free_slots(self) -> list[int]:
        used = {s for grant in self._granted.values() for s in grant.slot_ids}
        return [s for s in self.slot_ids if s not in used]

    def pending(self) -> list[AllocationRequest]:
        return sorted(self._pending.values(), key=lambda r: (r.priority, r.order))

    def granted(self) -> dict[str, Grant]:
        return dict(self._granted)

    def is_pending(self, key: str) -> bool:
        return key in self._pending

    def request(self, request: AllocationRequest) -> None:
        if request.allocation_key in self._pending or request.allocation_key in self._granted:
            return
        if request.slots < 0:
            raise ValueError(f"slots must be >= 0, got {request.slots}")
        request.order = next(self._counter)
        self._pending[request.allocation_key] = request

    def update_experiment(
        self, experiment_id: int, *, priority: int, max_slots: int | None
    ) -> None:
        """New priority and max_slots for the experiment's waiting requests (granted ones keep
        their slots; its later requests carry the new values themselves)."""
        for request in self._pending.values():
            if request.experiment_id == experiment_id:
                request.priority = priority
                request.max_slots = max_slots

    def cancel(self, key: str) -> None:
        """Drop a pending request or release a granted one."""
        self._pending.pop(key, None)
        self._granted.pop(key, None)

    release = cancel

    def _experiment_usage(self, experiment_id: int) -> int:
        return sum(
            len(g.slot_ids)
            for g in self._granted.values()
            if g.request.experiment_id == experiment_id
        )

    def schedule(self) -> list[Grant]:
        """Grant what can start now; returns the new grants (in start order)."""
        grants: list[Grant] = []
        free = self.free_slots
        blocked = False
        for request in self.pending():
            if request.slots == 0:  # needs no slot, so it never waits
                grants.append(self._grant(request, ()))
                continue
            if blocked:
                continue
            if request.slots > len(self.slot_ids):
                continue  # can never fit: must not block the line
            if (
                request.max_slots is not None
                and self._experiment_usage(request.experiment_id) + request.slots
                > request.max_slots
            ):
                continue
            if request.slots > len(free):
                blocked = True  # reserve the head of the line (see module docstring)
                continue
            taken, free = free[: request.slots], free[request.slots :]
            grants.append(self._grant(request, tuple(taken)))
        return grants

    def _grant(self, request: AllocationRequest, slot_ids: tuple[int, ...]) -> Grant:
        del self._pending[request.allocation_key]
        grant = Grant(request, slot_ids)
        self._granted[request.allocation_key] = grant
        return grant


__all__ = ["Scheduler", "AllocationRequest", "Grant", "DEFAULT_PRIORITY"]
