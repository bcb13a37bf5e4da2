"""The `priority` policy for one pool (Determined's priority scheduler).

Requests are taken in queue order: smaller priority first, then the job's queue position (a
job moved with `det job update --ahead-of/--behind-of`; else its experiment id, so jobs of one
priority go first come, first served), then arrival. One that fits starts.
One that does not fit *claims* slots: the free ones, then those of runs already asked to exit,
then (with preemption on) those of running allocations of a strictly less important priority,
least important first and newest first among equals. A request whose claim cannot be met
reserves the head of the line: nothing behind it starts until it does (so a 2-slot request is
never starved by a stream of 1-slot ones; with no runtime estimates there is no safe backfill).
"""

from __future__ import annotations

from collections.abc import Sequence

from master_lite.scheduler._policy import (
    Decision,
    Holding,
    Ledger,
    Policy,
    Request,
    eligible_victims,
    held_back,
)


def priority_pool(
    pool: str,
    capacity: int,
    holdings: Sequence[Holding],
    waiting: Sequence[Request],
    ledger: Ledger,
    policy: Policy,
    now: float,
    decision: Decision,
) -> None:
    """Decide for the requests `waiting` (sorted) of one pool; results go into `decision`."""
    free = capacity - sum(h.slots for h in holdings)
    incoming = sum(h.slots for h in holdings if h.stopping)  # runs already asked to exit
    victims = eligible_victims(holdings, pool, now, policy) if policy.preemption else []
    # Least important first, newest first among equals.
    victims.sort(key=lambda h: (-h.priority, -h.started, -h.order))
    taken: set[str] = set()
    blocked_by: Request | None = None
    for request in waiting:
        why = held_back(request, ledger, policy, capacity)
        if why is not None:
            decision.reasons[request.key] = why
            continue
        if blocked_by is not None:
            decision.reasons[request.key] = (
                f"waiting: behind {blocked_by.key} (priority {blocked_by.priority}), "
                "which waits for slots first"
            )
            continue
        if request.slots <= free:
            free -= request.slots
            ledger.add(request.user, request.experiment_id, request.slots)
            decision.grants.append(request.key)
            continue
        need = request.slots - free
        if need <= incoming:
            incoming -= need
            free = 0
            decision.reasons[request.key] = (
                f"waiting: {need} of its {request.slots} slots are being freed (runs asked to exit)"
            )
            continue
        short = need - incoming
        lower = [v for v in victims if v.key not in taken and v.priority > request.priority]
        if sum(v.slots for v in lower) >= short:
            freed = 0
            for victim in lower:
                if freed >= short:
                    break
                taken.add(victim.key)
                decision.preempt.append(victim.key)
                freed += victim.slots
            incoming = freed - short
            free = 0
            decision.reasons[request.key] = (
                f"waiting: lower-priority runs were preempted to free {short} slots for it"
            )
            continue
        blocked_by = request
        decision.reasons[request.key] = (
            f"waiting for {request.slots} free slots in pool {pool!r} ({free} free now)"
        )
        free = 0  # reserved for it: nothing behind it starts first


__all__ = ["priority_pool"]
