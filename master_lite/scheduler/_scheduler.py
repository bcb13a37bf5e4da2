"""Slot accounting between scheduling decisions: the pending requests, the granted slots, which
grants were asked to stop, and the last decision's reasons. The decisions themselves are the
pure policy's (`_decide.decide`, rules in `_policy.py`, `_fair_share.py`, `_priority.py`).

A `Scheduler` built with no policy keeps the historical rule of this master (the `priority`
policy without preemption): requests in (priority, arrival) order, gang-allocated, with
head-of-line reservation. The master builds it with the configured policy (docs/scheduling.md).
`queue()` is what a job queue reads (docs/internals.md, "The scheduler's queue").
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence

from master_lite.scheduler._decide import decide
from master_lite.scheduler._policy import (
    DEFAULT_POOL,
    DEFAULT_PRIORITY,
    Decision,
    Holding,
    Policy,
    Request,
)
from master_lite.scheduler._pools import Pool, pools_json

# The policy of a Scheduler built without one: today's FIFO-by-priority, no preemption.
HISTORICAL_POLICY = Policy(kind="priority", preemption=False)


@dataclasses.dataclass
class AllocationRequest:
    allocation_key: str  # caller's handle (the master uses "trial-<id>")
    experiment_id: int
    slots: int
    priority: int = DEFAULT_PRIORITY
    max_slots: int | None = None  # the experiment's resources.max_slots
    order: int = 0  # set by the scheduler: arrival order
    user: str = ""  # the experiment's owner (fair share and quotas are per user)
    weight: float = 1.0  # the experiment's resources.weight
    pool: str = DEFAULT_POOL  # the experiment's resources.resource_pool
    position: float = 0.0  # the experiment's job queue position (`Request.position`)
    workspace_id: int = 0  # the experiment's workspace (workspace quotas; 0: none)
    workspace: str = ""  # its name, for the reason its quota gives


@dataclasses.dataclass(frozen=True)
class Grant:
    request: AllocationRequest
    slot_ids: tuple[int, ...]
    started: float = 0.0  # on the scheduler's clock


@dataclasses.dataclass(frozen=True)
class QueueEntry:
    """One allocation in the queue: running (RUNNING, or STOPPING once asked to exit) or
    waiting (QUEUED, with the reason)."""

    key: str
    user: str
    experiment_id: int
    pool: str
    priority: int
    weight: float
    slots_requested: int
    slots_held: int
    state: str  # QUEUED | RUNNING | STOPPING
    wait_reason: str | None
    order: int  # arrival order (smaller: earlier)
    position: float = 0.0  # the experiment's job queue position


@dataclasses.dataclass(frozen=True)
class Step:
    """One scheduling pass: the new grants (in start order) and the keys to preempt."""

    grants: list[Grant]
    preempt: list[str]
    # Seconds until a run too young to be preempted no longer is, while requests wait and the
    # policy may preempt: the caller runs a pass again then (None: nothing to wait for).
    recheck_in: float | None = None


class Scheduler:
    def __init__(
        self,
        slot_ids: list[int],
        *,
        policy: Policy | None = None,
        pools: Mapping[str, Sequence[int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        default_pool: str | None = None,
        details: Sequence[Pool] | None = None,
    ) -> None:
        """`slot_ids` all slots; `pools` which of them each pool has (default: one pool,
        `default`, with all of them); `default_pool` the pool of requests that name none
        (default: the first); `details` the pools' descriptions and slot types (for
        `pools_json`; default: CPU pools without a description)."""
        self.slot_ids = list(slot_ids)
        self.policy = policy or HISTORICAL_POLICY
        self.pools: dict[str, list[int]] = (
            {name: list(ids) for name, ids in pools.items()}
            if pools is not None
            else {DEFAULT_POOL: list(self.slot_ids)}
        )
        unknown = {s for ids in self.pools.values() for s in ids} - set(self.slot_ids)
        if unknown:
            raise ValueError(f"pools name slots that do not exist: {sorted(unknown)}")
        self.default_pool = default_pool or next(iter(self.pools), DEFAULT_POOL)
        if self.default_pool not in self.pools:
            raise ValueError(f"default pool {self.default_pool!r} is not one of the pools")
        self._details = list(details or []) or [
            Pool(name, tuple(ids), "cpu") for name, ids in self.pools.items()
        ]
        self._clock = clock
        self._pending: dict[str, AllocationRequest] = {}
        self._granted: dict[str, Grant] = {}
        self._stopping: set[str] = set()
        self._reasons: dict[str, str] = {}
        self._last_served: dict[str, float] = {}
        self._shares: dict[str, dict[str, int]] = {}
        self._experiment_reasons: dict[int, str] = {}
        self._counter = itertools.count()
        # Whether the slots follow a cluster's nodes (Ray: `replace_pools`), so a request
        # larger than its pool may fit later.
        self.live_shape = False

    @property
    def free_slots(self) -> list[int]:
        used = {s for grant in self._granted.values() for s in grant.slot_ids}
        return [s for s in self.slot_ids if s not in used]

    def replace_pools(self, pools: Sequence[Pool]) -> None:
        """A new shape of the cluster (Ray's nodes joined or left): every pool's slots are now
        `pools`'. A pool not named keeps existing with no slots; grants keep the slots they
        hold (their runs end on their own when a node is gone) and the next pass decides on
        the new counts."""
        self.live_shape = True
        new = {p.name: list(p.slot_ids) for p in pools}
        for name in self.pools:
            new.setdefault(name, [])
        self.pools = new
        self.slot_ids = sorted({s for ids in new.values() for s in ids})
        details = {p.name: p for p in self._details}
        details.update({p.name: p for p in pools})
        self._details = [
            dataclasses.replace(details.get(name) or Pool(name, (), "cpu"), slot_ids=tuple(ids))
            for name, ids in new.items()
        ]

    def slot_type(self, slot: int) -> str:
        """ "cuda" or "cpu": the type of the pool that has `slot` ("cpu" for none)."""
        for pool in self._details:
            if slot in pool.slot_ids:
                return pool.slot_type
        return "cpu"

    def pool_slots(self, pool: str) -> list[int]:
        """The slot ids of `pool` ([] for an unknown pool)."""
        return list(self.pools.get(pool, []))

    def pending(self) -> list[AllocationRequest]:
        return sorted(self._pending.values(), key=lambda r: (r.priority, r.position, r.order))

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
        self,
        experiment_id: int,
        *,
        priority: int,
        max_slots: int | None,
        weight: float | None = None,
        position: float | None = None,
        pool: str | None = None,
    ) -> None:
        """New priority, max_slots (and weight, queue position, pool) for the experiment's
        waiting requests (granted ones keep their slots, in their pool; its later requests
        carry the new values themselves). A new position also reorders its granted ones in
        `queue()`."""
        for request in self._pending.values():
            if request.experiment_id == experiment_id:
                request.priority = priority
                request.max_slots = max_slots
                if weight is not None:
                    request.weight = weight
                if position is not None:
                    request.position = position
                if pool is not None:
                    request.pool = pool
        if position is not None:
            for grant in self._granted.values():
                if grant.request.experiment_id == experiment_id:
                    grant.request.position = position

    def set_workspace_quotas(self, quotas: Mapping[int, int]) -> None:
        """The workspaces' slot quotas (workspace id -> slots; a workspace without one has no
        limit) from now on; the next pass applies them. Running allocations above a lowered
        quota keep their slots (nothing is preempted for a quota)."""
        self.policy = dataclasses.replace(self.policy, workspace_max_slots=dict(quotas))

    def move_experiment(self, experiment_id: int, workspace_id: int, workspace: str) -> None:
        """The experiment is now in another workspace: its waiting requests and running grants
        count against that workspace's quota from the next pass."""
        requests = [*self._pending.values(), *(g.request for g in self._granted.values())]
        for request in requests:
            if request.experiment_id == experiment_id:
                request.workspace_id, request.workspace = workspace_id, workspace

    def set_daily_usage(self, over: Mapping[str, tuple[float, float]]) -> None:
        """Who is over their slot-hours per day now (user -> (slot-hours used, when they may
        run again)); the next pass holds their waiting requests back."""
        self.policy = dataclasses.replace(self.policy, over_daily=dict(over))

    def cancel(self, key: str) -> None:
        """Drop a pending request or release a granted one."""
        self._pending.pop(key, None)
        self._granted.pop(key, None)
        self._stopping.discard(key)
        self._reasons.pop(key, None)

    release = cancel

    def mark_stopping(self, key: str) -> None:
        """The grant's run was asked to exit (for any reason): it is not preempted again, and
        its slots count as coming free."""
        if key in self._granted:
            self._stopping.add(key)

    def pools_json(self) -> dict:
        """GET /api/v1/resource-pools (Determined's names): the pools, slots and slots used."""
        used: dict[str, int] = {}
        for grant in self._granted.values():
            used[grant.request.pool] = used.get(grant.request.pool, 0) + len(grant.slot_ids)
        return pools_json(
            self._details, used, scheduler=self.policy.kind, default=self.default_pool
        )

    def wait_reason(self, key: str) -> str | None:
        """Why the pending request waits, as of the last pass (None: not pending)."""
        return self._reasons.get(key) if key in self._pending else None

    def experiment_wait_reason(self, experiment_id: int) -> str | None:
        """Why the experiment's first waiting request waits, as of the last pass."""
        return self._experiment_reasons.get(experiment_id)

    def shares(self) -> dict[str, dict[str, int]]:
        """Each user's fair share of each pool as of the last pass (fair_share only)."""
        return {pool: dict(users) for pool, users in self._shares.items()}

    def _holdings(self) -> list[Holding]:
        return [
            Holding(
                key=key,
                user=g.request.user,
                experiment_id=g.request.experiment_id,
                slots=len(g.slot_ids),
                started=g.started,
                priority=g.request.priority,
                weight=g.request.weight,
                pool=g.request.pool,
                order=g.request.order,
                position=g.request.position,
                stopping=key in self._stopping,
                workspace_id=g.request.workspace_id,
            )
            for key, g in self._granted.items()
        ]

    def _requests(self) -> list[Request]:
        return [
            Request(
                key=r.allocation_key,
                user=r.user,
                experiment_id=r.experiment_id,
                slots=r.slots,
                order=r.order,
                priority=r.priority,
                weight=r.weight,
                pool=r.pool,
                max_slots=r.max_slots,
                position=r.position,
                workspace_id=r.workspace_id,
                workspace=r.workspace,
            )
            for r in self._pending.values()
        ]

    def decide(self) -> Decision:
        """The policy's decision for the current state (changes nothing)."""
        return decide(
            {name: len(ids) for name, ids in self.pools.items()},
            self._holdings(),
            self._requests(),
            self.policy,
            self._clock(),
            self._last_served,
        )

    def step(self) -> Step:
        """One pass: grant what can start now (slots taken from each request's pool) and mark
        the runs to preempt as stopping; the caller launches the grants and preempts those."""
        decision = self.decide()
        now = self._clock()
        used = {s for grant in self._granted.values() for s in grant.slot_ids}
        free = {name: [s for s in ids if s not in used] for name, ids in self.pools.items()}
        grants: list[Grant] = []
        for key in decision.grants:
            request = self._pending[key]
            pool_free = free.get(request.pool, [])
            taken, free[request.pool] = pool_free[: request.slots], pool_free[request.slots :]
            grants.append(self._grant(request, tuple(taken), now))
        for key in decision.preempt:
            self._stopping.add(key)
        self._reasons = decision.reasons
        self._shares = decision.shares
        self._experiment_reasons = {}
        for request in self.pending():  # the first waiting request's reason, per experiment
            reason = self._reasons.get(request.allocation_key)
            if reason is not None:
                self._experiment_reasons.setdefault(request.experiment_id, reason)
        return Step(grants=grants, preempt=list(decision.preempt), recheck_in=self._recheck(now))

    def _recheck(self, now: float) -> float | None:
        policy = self.policy
        if not self._pending or (policy.kind == "priority" and not policy.preemption):
            return None
        young = [
            policy.min_run_seconds - (now - g.started)
            for key, g in self._granted.items()
            if key not in self._stopping and g.slot_ids
        ]
        young = [left for left in young if left > 0]
        return min(young) if young else None

    def schedule(self) -> list[Grant]:
        """Grant what can start now; returns the new grants (in start order). Preemptions the
        policy decides are marked (see `step`, which also returns them)."""
        return self.step().grants

    def queue(self) -> list[QueueEntry]:
        """Every allocation the scheduler knows, in queue order: by pool, then running before
        waiting, then (priority, queue position, arrival)."""
        entries = [
            QueueEntry(
                key=key,
                user=g.request.user,
                experiment_id=g.request.experiment_id,
                pool=g.request.pool,
                priority=g.request.priority,
                weight=g.request.weight,
                slots_requested=g.request.slots,
                slots_held=len(g.slot_ids),
                state="STOPPING" if key in self._stopping else "RUNNING",
                wait_reason=None,
                order=g.request.order,
                position=g.request.position,
            )
            for key, g in self._granted.items()
        ]
        entries.extend(
            QueueEntry(
                key=r.allocation_key,
                user=r.user,
                experiment_id=r.experiment_id,
                pool=r.pool,
                priority=r.priority,
                weight=r.weight,
                slots_requested=r.slots,
                slots_held=0,
                state="QUEUED",
                wait_reason=self._reasons.get(r.allocation_key),
                order=r.order,
                position=r.position,
            )
            for r in self._pending.values()
        )
        entries.sort(key=lambda e: (e.pool, e.state == "QUEUED", e.priority, e.position, e.order))
        return entries

    def _grant(self, request: AllocationRequest, slot_ids: tuple[int, ...], now: float) -> Grant:
        del self._pending[request.allocation_key]
        self._reasons.pop(request.allocation_key, None)
        grant = Grant(request, slot_ids, now)
        self._granted[request.allocation_key] = grant
        if slot_ids:
            self._last_served[request.user] = now
        return grant


__all__ = [
    "AllocationRequest",
    "DEFAULT_PRIORITY",
    "Grant",
    "HISTORICAL_POLICY",
    "QueueEntry",
    "Scheduler",
    "Step",
]
