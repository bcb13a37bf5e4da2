"""The `fair_share` policy for one pool: hierarchical max-min fairness, gang-allocated.

1. Each user's *share* of the pool: the pool's slots handed out one at a time to the user with
   demand (running plus waiting slots) whose share divided by their weight is smallest
   (water-filling; a share never exceeds the demand). Ties go to the user served least
   recently, so that when there are more users than slots, slots rotate instead of staying put.
2. Each user's share divided the same way between their experiments, by `resources.weight`
   (ties: the more important priority, then the earlier queue position, then the older
   request): a user's own jobs are ordered by the job queue (`det job update --ahead-of`).
3. Requests *within* their share (their user's and their experiment's holdings plus the request
   fit the shares; or they hold nothing yet and their share is not zero) start if their slots
   are free; otherwise they claim the free slots, those of runs already asked to exit, and
   those of other users' running allocations above their share, newest first. A victim's
   owner is never pushed below their share; a run younger than the minimum run time is never
   a victim. A user's experiments do not preempt each other (one user: no preemption ever);
   between them, the shares decide who gets the slots that come free. A request within its
   share whose slots cannot be had yet keeps the free ones it will need (head-of-line
   reservation, so a gang is not starved by a stream of smaller requests).
4. Free slots left over go to the other requests in queue order (priority, queue position,
   arrival; work-conserving: a lone user gets the whole pool); they are the first preempted
   when someone else's share needs them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from master_lite.scheduler._policy import (
    Decision,
    Holding,
    Ledger,
    Policy,
    Request,
    admit_to_workspace,
    eligible_victims,
    held_back,
)

K = TypeVar("K", bound=Hashable)
_NEVER = float("-inf")


def water_fill(
    capacity: int,
    demand: Mapping[K, int],
    weight: Callable[[K], float],
    tiebreak: Mapping[K, tuple],
) -> dict[K, int]:
    """Integer max-min fair shares of `capacity` slots by weight, capped by demand."""
    shares: dict[K, int] = {key: 0 for key in demand}
    heap = [(0.0, tiebreak[key], n, key) for n, key in enumerate(demand) if demand[key] > 0]
    heapq.heapify(heap)
    left = capacity
    while left > 0 and heap:
        _, tie, n, key = heapq.heappop(heap)
        shares[key] += 1
        left -= 1
        if shares[key] < demand[key]:
            heapq.heappush(heap, (shares[key] / weight(key), tie, n, key))
    return shares


def _shares(
    capacity: int,
    active: Sequence[Holding],
    wanting: Sequence[Request],
    policy: Policy,
    last_served: Mapping[str, float],
) -> tuple[dict[str, int], dict[int, int]]:
    """Each user's and each experiment's share of the pool (slots)."""
    user_demand: dict[str, int] = {}
    user_tie: dict[str, float] = {}
    exp_demand: dict[int, int] = {}
    exp_user: dict[int, str] = {}
    exp_weight: dict[int, float] = {}
    exp_tie: dict[int, tuple[int, float, int]] = {}
    # `wanting` is in queue order: an experiment's first request is its tie.
    items: list[Holding | Request] = [*wanting, *active]
    for item in items:
        user, exp, slots = item.user, item.experiment_id, item.slots
        user_demand[user] = user_demand.get(user, 0) + slots
        if exp in exp_demand:
            exp_demand[exp] += slots
            tie = (item.priority, item.position, item.order)
            if tie < exp_tie[exp]:
                exp_tie[exp] = tie
        else:
            exp_demand[exp] = slots
            exp_user[exp] = user
            exp_weight[exp] = item.weight if item.weight > 0 else 1.0
            exp_tie[exp] = (item.priority, item.position, item.order)
    for user in user_demand:
        user_tie[user] = last_served.get(user, _NEVER)
    quota_capped = {
        user: min(demand, quota) if (quota := policy.quota_of(user)) is not None else demand
        for user, demand in user_demand.items()
    }
    user_share = water_fill(
        capacity,
        quota_capped,
        policy.weight_of,
        {user: (user_tie[user], user) for user in user_demand},
    )
    by_user: dict[str, list[int]] = {}
    for exp, user in exp_user.items():
        by_user.setdefault(user, []).append(exp)
    exp_share: dict[int, int] = {}
    for user, exps in by_user.items():
        if len(exps) == 1:
            exp_share[exps[0]] = min(user_share[user], exp_demand[exps[0]])
            continue
        exp_share.update(
            water_fill(
                user_share[user],
                {exp: exp_demand[exp] for exp in exps},
                exp_weight.__getitem__,
                exp_tie,
            )
        )
    return user_share, exp_share


def fair_share_pool(
    pool: str,
    capacity: int,
    holdings: Sequence[Holding],
    waiting: Sequence[Request],
    ledger: Ledger,
    policy: Policy,
    now: float,
    decision: Decision,
    last_served: Mapping[str, float],
) -> None:
    """Decide for the requests `waiting` (sorted) of one pool; results go into `decision`."""
    free = capacity - sum(h.slots for h in holdings)
    incoming = sum(h.slots for h in holdings if h.stopping)
    active = [h for h in holdings if not h.stopping]
    wanting: list[Request] = []
    simple = not policy.has_quotas
    admitted: dict[int, int] = {}  # slots of requests admitted per capped workspace
    for request in waiting:
        if simple and request.max_slots is None and request.slots <= capacity:
            wanting.append(request)  # the common case, without a call
            continue
        why = held_back(request, ledger, policy, capacity)
        if why is None and policy.workspace_max_slots:  # no share beyond the quota
            why = admit_to_workspace(request, ledger, policy, admitted)
        if why is None:
            wanting.append(request)
        else:
            decision.reasons[request.key] = why
    if not wanting:
        return
    user_share, exp_share = _shares(capacity, active, wanting, policy, last_served)
    decision.shares[pool] = user_share
    # What each user and experiment holds in this pool (running, granted or claimed now), and
    # each user's holdings counted only up to each of their experiments' share ("effective").
    user_held: dict[str, int] = {}
    exp_held: dict[int, int] = {}
    owner: dict[int, str] = {}
    for h in active:
        user_held[h.user] = user_held.get(h.user, 0) + h.slots
        exp_held[h.experiment_id] = exp_held.get(h.experiment_id, 0) + h.slots
        owner[h.experiment_id] = h.user
    user_eff: dict[str, int] = {}
    for exp, held in exp_held.items():
        user_eff[owner[exp]] = user_eff.get(owner[exp], 0) + min(held, exp_share.get(exp, 0))

    def counted(request: Request, slots: int) -> int:
        """How much `slots` more of the request's experiment adds to its user's effective."""
        eshare, eheld = (
            exp_share.get(request.experiment_id, 0),
            exp_held.get(request.experiment_id, 0),
        )
        return min(eheld + slots, eshare) - min(eheld, eshare)

    def hold(request: Request, slots: int) -> None:
        user_eff[request.user] = user_eff.get(request.user, 0) + counted(request, slots)
        user_held[request.user] = user_held.get(request.user, 0) + slots
        exp_held[request.experiment_id] = exp_held.get(request.experiment_id, 0) + slots

    def within(request: Request) -> bool:
        # Experiment level: its share takes the request (a gang larger than its share is
        # admitted while it holds nothing, so that it is not starved).
        eshare, eheld = (
            exp_share.get(request.experiment_id, 0),
            exp_held.get(request.experiment_id, 0),
        )
        if not (eheld + request.slots <= eshare or (eheld == 0 and eshare > 0)):
            return False
        # User level, counting what their experiments hold beyond their own shares as not
        # theirs to keep: those are the slots the user's other experiments give back first.
        share, eff = user_share.get(request.user, 0), user_eff.get(request.user, 0)
        return eff + counted(request, request.slots) <= share or (eff == 0 and share > 0)

    victims = eligible_victims(active, pool, now, policy)
    taken: set[str] = set()
    handled: set[str] = set()
    # Quotas and max_slots may change as grants are made: checked again (when there are any).
    recheck = policy.has_quotas
    for request in wanting:  # 3: within their share: start, or claim slots (one pass, in order)
        if not exp_share.get(request.experiment_id):
            continue  # the common case with many users: no share at all
        if not within(request):
            continue
        if (recheck or request.max_slots is not None) and held_back(
            request, ledger, policy, capacity
        ) is not None:
            continue
        handled.add(request.key)
        if request.slots <= free:
            free -= request.slots
            hold(request, request.slots)
            ledger.add(request.user, request.experiment_id, request.slots)
            decision.grants.append(request.key)
            continue
        hold(request, request.slots)  # claimed: the user's next request is measured after it
        from_free = min(free, request.slots)
        rest = request.slots - from_free
        if rest <= incoming:
            free -= from_free
            incoming -= rest
            decision.reasons[request.key] = (
                f"waiting: {rest} of its {request.slots} slots are being freed (runs asked to exit)"
            )
            continue
        short = rest - incoming
        chosen: list[Holding] = []
        freed = 0
        for victim in victims:
            if freed >= short:
                break
            if victim.key in taken or not _above_share(victim, request, user_held, user_share):
                continue
            chosen.append(victim)
            freed += victim.slots
            # Counted at once, so the next victim is measured after this one leaves.
            user_held[victim.user] -= victim.slots
            exp_held[victim.experiment_id] -= victim.slots
        if freed >= short:
            free -= from_free
            incoming = freed - short
            for victim in chosen:
                taken.add(victim.key)
                decision.preempt.append(victim.key)
            decision.reasons[request.key] = (
                f"waiting: runs above their fair share were preempted to free {short} slots for it"
            )
            continue
        for victim in chosen:  # not enough to be had: preempt nobody for it
            user_held[victim.user] += victim.slots
            exp_held[victim.experiment_id] += victim.slots
        # It keeps the free slots it will need (head-of-line reservation, within its share
        # only): a stream of smaller requests must not starve a gang.
        free -= from_free
        decision.reasons[request.key] = (
            f"waiting for {request.slots} free slots in pool {pool!r} "
            f"({from_free} free now, kept for it)"
        )

    said_before: dict[tuple[str, int, int], str] = {}
    for request in wanting:  # 4: what is left over goes to anyone, in order
        if request.key in handled:
            continue
        why = (
            held_back(request, ledger, policy, capacity)
            if recheck or request.max_slots is not None
            else None
        )
        if why is not None:
            decision.reasons[request.key] = why
        elif request.slots <= free:
            free -= request.slots
            hold(request, request.slots)
            ledger.add(request.user, request.experiment_id, request.slots)
            decision.grants.append(request.key)
        else:
            # Thousands may wait: one string per (user, slots) and state of the pool.
            said = (request.user, request.slots, free)
            reason = said_before.get(said)
            if reason is None:
                share = user_share.get(request.user, 0)
                held = user_held.get(request.user, 0)
                if held > share:  # above it (runs not yet preemptible, or preemption off)
                    reason = (
                        f"waiting for its fair share: {request.user} already holds {held} "
                        f"slots, above their fair share of {share} in pool {pool!r}"
                    )
                elif held == share:
                    reason = (
                        f"waiting for its fair share: {request.user} holds {held} of the "
                        f"{share} slots that are theirs by fair share in pool {pool!r}"
                    )
                else:
                    reason = (
                        f"waiting for {request.slots} free slots in pool {pool!r} ({free} free now)"
                    )
                said_before[said] = reason
            decision.reasons[request.key] = reason


def _above_share(
    victim: Holding,
    request: Request,
    user_held: Mapping[str, int],
    user_share: Mapping[str, int],
) -> bool:
    """Whether `victim` may be preempted for `request`: another user's run whose owner stays at
    or above their share without it. A user's own experiments never preempt each other: their
    shares only decide which of them gets a slot that comes free (so with one user nothing is
    ever preempted)."""
    if victim.user == request.user:
        return False
    return user_held.get(victim.user, 0) - victim.slots >= user_share.get(victim.user, 0)


__all__ = ["fair_share_pool", "water_fill"]
