"""The scheduling policy as a pure function: `decide` (see `_policy.py` for the rules)."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence

from master_lite.scheduler._fair_share import fair_share_pool
from master_lite.scheduler._policy import Decision, Holding, Ledger, Policy, Request
from master_lite.scheduler._priority import priority_pool

# The queue's order: priority, then the job's queue position, then arrival.
_QUEUE_ORDER = operator.attrgetter("priority", "position", "order")


def decide(
    pools: Mapping[str, int],
    holdings: Sequence[Holding],
    requests: Sequence[Request],
    policy: Policy,
    now: float,
    last_served: Mapping[str, float] | None = None,
) -> Decision:
    """Grants and preemptions for `pools` (name -> slot count) given what runs and waits.

    `now` is on the clock of the holdings' `started`; `last_served` (user -> when their last
    request started, same clock) breaks ties between users so that slots rotate (fair_share).
    Pools are decided one after the other; quotas (user and workspace) and `max_slots` count
    over all pools."""
    decision = Decision()
    # Workspaces counted only under workspace quotas (thousands of requests may wait).
    ledger = Ledger(holdings, requests if policy.workspace_max_slots else ())
    by_pool: dict[str, list[Request]] = {}
    zero_slot = False
    for request in requests:
        if request.slots == 0:  # needs no slot, so it never waits
            decision.grants.append(request.key)
            zero_slot = True
        elif request.pool not in pools:
            decision.reasons[request.key] = (
                f"waiting: resource pool {request.pool!r} does not exist "
                "(det resource-pool list shows the pools)"
            )
        else:
            by_pool.setdefault(request.pool, []).append(request)
    holdings_by_pool: dict[str, list[Holding]] = {}
    for holding in holdings:
        holdings_by_pool.setdefault(holding.pool, []).append(holding)
    for pool, capacity in pools.items():
        waiting = by_pool.get(pool)
        if not waiting:
            continue
        waiting.sort(key=_QUEUE_ORDER)
        mine = holdings_by_pool.get(pool, [])
        if policy.kind == "priority":
            priority_pool(pool, capacity, mine, waiting, ledger, policy, now, decision)
        else:
            fair_share_pool(
                pool, capacity, mine, waiting, ledger, policy, now, decision, last_served or {}
            )
    if zero_slot or len(by_pool) > 1:
        # Start order: the queue's order over pools and zero-slot requests (one pool's grants
        # are in that order already).
        rank = {r.key: _QUEUE_ORDER(r) for r in requests}
        decision.grants.sort(key=rank.__getitem__)
    return decision


__all__ = ["decide"]
