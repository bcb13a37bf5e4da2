"""The scheduling policy's values and shared rules. The policy is a pure function
(`_decide.decide`): who starts now, who is asked to make room, and why everyone else waits. No
clock, no I/O, no master: it reads plain values and answers a `Decision`; `Scheduler`
(`_scheduler.py`) keeps the state between calls and the simulation suite drives `decide`
directly.

Two policies, named as Determined names them (master/internal/config/scheduler_config.go):

* `fair_share` (`_fair_share.py`): the slots of a pool are divided between the users with
  demand (equally, or by a per-user weight), then each user's share between their experiments
  by `resources.weight`. Requests within their share start first; free slots left over go to
  anyone (work-conserving); an allocation above its owner's share is preempted when someone
  within their share waits for its slots.
* `priority` (`_priority.py`): smaller `resources.priority` first, then arrival order, with
  head-of-line reservation; with `preemption` on, a waiting request preempts running ones of a
  strictly less important priority.

Rules common to both: gang allocation (all of a request's slots at once, or none); an
allocation younger than `min_run_seconds` is never preempted, nor one already asked to stop;
victims are taken newest first; an experiment's `max_slots`, a user's slot quota and its
workspace's slot quota hold a request back with a reason; a request needing more slots than its
pool has never blocks others.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping

POLICIES = ("fair_share", "priority")
# Determined's default `resources.priority` (config.DefaultSchedulingPriority).
DEFAULT_PRIORITY = 42
DEFAULT_POOL = "default"
# A run is never preempted before it has run this long (seconds), so searches do not thrash.
DEFAULT_MIN_RUN_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class Policy:
    """The master's scheduling configuration (docs/scheduling.md)."""

    kind: str = "fair_share"
    # The priority policy preempts only with this on (Determined's `priority.preemption`);
    # fair share always may (as Determined's fair share scheduler does).
    preemption: bool = True
    min_run_seconds: float = DEFAULT_MIN_RUN_SECONDS
    # Relative share of each user between users (default 1.0 each).
    user_weights: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # The most slots one user may hold at once, over all pools (None: no limit), and per-user
    # overrides of it.
    max_slots_per_user: int | None = None
    user_max_slots: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # The most slots the experiments of one workspace may hold at once, over all pools, by
    # workspace id (workspaces without an entry: no limit). Set by admins at run time
    # (Determined's workspace resource quota; docs/scheduling.md, "Quotas").
    workspace_max_slots: Mapping[int, int] = dataclasses.field(default_factory=dict)
    # Slot-hours one user's runs may hold in a rolling 24 h (None: no limit), and per-user
    # overrides; `over_daily` is who is over it now (user -> (slot-hours used, the moment they
    # may run again, time.time() clock)), filled at each pass from the allocation history.
    slot_hours_per_day: float | None = None
    user_slot_hours_per_day: Mapping[str, float] = dataclasses.field(default_factory=dict)
    over_daily: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in POLICIES:
            raise ValueError(f"scheduler: expected one of {', '.join(POLICIES)}, got {self.kind!r}")
        if self.min_run_seconds < 0:
            raise ValueError(f"scheduler_min_run_seconds: must be >= 0, got {self.min_run_seconds}")
        if self.max_slots_per_user is not None and self.max_slots_per_user < 0:
            raise ValueError(f"max_slots_per_user: must be >= 0, got {self.max_slots_per_user}")
        for user, weight in self.user_weights.items():
            if not weight > 0:
                raise ValueError(f"user_weights: {user!r} must have a weight > 0, got {weight}")
        for user, quota in self.user_max_slots.items():
            if quota < 0:
                raise ValueError(f"user_max_slots: {user!r} must be >= 0, got {quota}")
        if self.slot_hours_per_day is not None and not self.slot_hours_per_day > 0:
            raise ValueError(f"slot_hours_per_day: must be > 0, got {self.slot_hours_per_day}")
        for user, hours in self.user_slot_hours_per_day.items():
            if not hours > 0:
                raise ValueError(f"user_slot_hours_per_day: {user!r} must be > 0, got {hours}")
        for workspace, quota in self.workspace_max_slots.items():
            if quota < 0:
                raise ValueError(f"workspace {workspace}'s slot quota must be >= 0, got {quota}")

    @property
    def has_quotas(self) -> bool:
        return (
            self.max_slots_per_user is not None
            or bool(self.user_max_slots)
            or bool(self.workspace_max_slots)
            or bool(self.over_daily)
        )

    @property
    def has_daily_limits(self) -> bool:
        return self.slot_hours_per_day is not None or bool(self.user_slot_hours_per_day)

    def daily_limit_of(self, user: str) -> float | None:
        """The user's slot-hours per rolling 24 h (None: no limit)."""
        return self.user_slot_hours_per_day.get(user, self.slot_hours_per_day)

    def quota_of(self, user: str) -> int | None:
        """The user's slot quota (None: unlimited)."""
        return self.user_max_slots.get(user, self.max_slots_per_user)

    def weight_of(self, user: str) -> float:
        return float(self.user_weights.get(user, 1.0))


@dataclasses.dataclass(frozen=True)
class Holding:
    """A running allocation: what it holds and since when (`started`: the caller's clock)."""

    key: str
    user: str
    experiment_id: int
    slots: int
    started: float
    priority: int = DEFAULT_PRIORITY
    weight: float = 1.0
    pool: str = DEFAULT_POOL
    order: int = 0  # the arrival order of the request it was granted for
    position: float = 0.0  # its experiment's queue position (see Request.position)
    stopping: bool = False  # already asked to exit: never chosen again; its slots come free
    workspace_id: int = 0  # its experiment's workspace (workspace quotas; 0: none known)


@dataclasses.dataclass(frozen=True)
class Request:
    """A pending request for `slots` slots of `pool`, all at once."""

    key: str
    user: str
    experiment_id: int
    slots: int
    order: int
    priority: int = DEFAULT_PRIORITY
    weight: float = 1.0
    pool: str = DEFAULT_POOL
    max_slots: int | None = None  # the experiment's resources.max_slots
    # The experiment's place in the job queue (smaller: earlier), the sort key between
    # priority and arrival: requests go in (priority, position, order) order. The master
    # sets it to the experiment's id unless a user moved the job (`det job update --ahead-of`).
    position: float = 0.0
    workspace_id: int = 0  # its experiment's workspace (workspace quotas; 0: none known)
    workspace: str = ""  # that workspace's name (for the reason a quota gives)


@dataclasses.dataclass
class Decision:
    """What to do now: `grants` start (in order), `preempt` are asked to exit; every request not
    granted has a reason in `reasons`; `shares` is each user's fair share per pool (fair_share)."""

    grants: list[str] = dataclasses.field(default_factory=list)
    preempt: list[str] = dataclasses.field(default_factory=list)
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    shares: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)


class Ledger:
    """Slots held per user, per experiment and per workspace (all pools), updated as a
    decision goes on. An experiment's workspace is the one its holdings and requests name."""

    def __init__(self, holdings: Iterable[Holding], requests: Iterable[Request] = ()) -> None:
        self.user: dict[str, int] = {}
        self.experiment: dict[int, int] = {}
        self.workspace: dict[int, int] = {}
        self._workspace_of: dict[int, int] = {}
        holdings = list(holdings)
        items: list[Holding | Request] = [*holdings, *requests]  # requests last: the newest
        for item in items:
            if item.workspace_id:
                self._workspace_of[item.experiment_id] = item.workspace_id
        for h in holdings:
            self.add(h.user, h.experiment_id, h.slots)

    def add(self, user: str, experiment_id: int, slots: int) -> None:
        self.user[user] = self.user.get(user, 0) + slots
        self.experiment[experiment_id] = self.experiment.get(experiment_id, 0) + slots
        workspace = self._workspace_of.get(experiment_id)
        if workspace is not None:
            self.workspace[workspace] = self.workspace.get(workspace, 0) + slots


def held_back(request: Request, ledger: Ledger, policy: Policy, capacity: int) -> str | None:
    """Why the request may not start whatever the others do (its pool, its experiment's
    max_slots, its user's quota, its workspace's quota), or None."""
    if request.slots <= capacity and request.max_slots is None and not policy.has_quotas:
        return None  # the common case, checked first: this runs for every waiting request
    if request.slots > capacity:
        return (
            f"waiting: needs {request.slots} slots but resource pool {request.pool!r} has "
            f"{capacity}; it cannot start (lower resources.slots_per_trial or use another pool)"
        )
    if (
        request.max_slots is not None
        and ledger.experiment.get(request.experiment_id, 0) + request.slots > request.max_slots
    ):
        return (
            f"waiting: experiment {request.experiment_id} is at its max_slots of "
            f"{request.max_slots}"
        )
    quota = policy.quota_of(request.user)
    if quota is not None and ledger.user.get(request.user, 0) + request.slots > quota:
        if request.slots > quota:
            return (
                f"waiting: needs {request.slots} slots, more than {request.user}'s "
                f"{quota}-slot quota; it cannot start until the quota is raised"
            )
        return f"waiting: {request.user} is at their {quota}-slot quota"
    return _workspace_held_back(request, ledger, policy) or _daily_held_back(request, policy)


def admit_to_workspace(
    request: Request, ledger: Ledger, policy: Policy, admitted: dict[int, int]
) -> str | None:
    """Admission of a pool's waiting requests to a decision under their workspace's quota:
    counting the requests admitted before it (`admitted`, updated), so that a workspace's
    share of the pool is no larger than its quota lets it use (else its requests would claim,
    and preempt, slots it cannot take). Why it is not admitted, or None."""
    quota = policy.workspace_max_slots.get(request.workspace_id)
    if quota is None:
        return None
    held = ledger.workspace.get(request.workspace_id, 0) + admitted.get(request.workspace_id, 0)
    if held + request.slots > quota:
        return f"waiting: workspace {request.workspace or request.workspace_id} is at its {quota}-slot quota"
    admitted[request.workspace_id] = admitted.get(request.workspace_id, 0) + request.slots
    return None


def _daily_held_back(request: Request, policy: Policy) -> str | None:
    """Why the user's slot-hours per day hold the request back, or None."""
    over = policy.over_daily.get(request.user)
    if over is None or request.slots == 0:
        return None
    used, at = over
    when = datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    return (
        f"waiting: {request.user} used {used:.1f} of their {policy.daily_limit_of(request.user):g} "
        f"slot-hours of the last 24 h; they may run again at {when} UTC"
    )


def _workspace_held_back(request: Request, ledger: Ledger, policy: Policy) -> str | None:
    """Why the request's workspace quota holds it back, or None."""
    quota = policy.workspace_max_slots.get(request.workspace_id)
    if quota is None or ledger.workspace.get(request.workspace_id, 0) + request.slots <= quota:
        return None
    name = request.workspace or str(request.workspace_id)
    if request.slots > quota:
        return (
            f"waiting: needs {request.slots} slots, more than workspace {name}'s "
            f"{quota}-slot quota; it cannot start until an admin raises the quota "
            "(det workspace resource-quota set)"
        )
    return f"waiting: workspace {name} is at its {quota}-slot quota"


def eligible_victims(
    holdings: Iterable[Holding], pool: str, now: float, policy: Policy
) -> list[Holding]:
    """Running allocations of `pool` that may be preempted now, newest first."""
    out = [
        h
        for h in holdings
        if h.pool == pool
        and not h.stopping
        and h.slots > 0
        and now - h.started >= policy.min_run_seconds
    ]
    out.sort(key=lambda h: (-h.started, -h.order))
    return out


__all__ = [
    "DEFAULT_MIN_RUN_SECONDS",
    "DEFAULT_POOL",
    "DEFAULT_PRIORITY",
    "POLICIES",
    "Decision",
    "Holding",
    "Ledger",
    "Policy",
    "Request",
    "eligible_victims",
    "admit_to_workspace",
    "held_back",
]
