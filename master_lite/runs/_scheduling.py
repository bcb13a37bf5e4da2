"""The runs part's side of the scheduler: what a trial asks for, and carrying out the
preemptions the scheduling policy decides (docs/scheduling.md).

A trial's request carries what the policy weighs: its experiment's owner (fair share and quotas
are per user), its workspace (workspace quotas), `resources.priority`, `resources.weight`, `resources.max_slots`,
`resources.resource_pool` and `resources.slots_per_trial`. A rebalancing preemption goes through
the normal preemption path with the intent "rebalance": the run is asked to checkpoint and exit
within the grace (else it is terminated), and its exit requeues the trial (QUEUED, `restarts`
unchanged) to resume from its latest checkpoint, as after a pause.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable

from master_lite import errors
from master_lite._core._shared import MasterState
from master_lite.reports._logs import TrialLogs
from master_lite.scheduler import (
    DAY_SECONDS,
    DEFAULT_PRIORITY,
    GPU,
    AllocationRequest,
    Scheduler,
    Step,
    over_daily_limit,
)
from master_lite.store import ExperimentRow

REBALANCE = "rebalance"


def check_resource_pool(config: dict, scheduler: Scheduler) -> None:
    """InvalidRequest (400) naming `resources.resource_pool` when it names no pool here."""
    pool = (config.get("resources") or {}).get("resource_pool")
    if pool and pool not in scheduler.pools:
        message = (
            f"resources.resource_pool: {pool!r} is not a resource pool of this master (pools: "
            f"{', '.join(scheduler.pools)}; `det resource-pool list` shows them)"
        )
        raise errors.InvalidRequest(message, [message])


def owner_name(shared: MasterState, experiment: ExperimentRow) -> str:
    """The experiment owner's user name (the scheduler's notion of a user)."""
    user = shared.store.users.get(experiment.owner_id)
    return str(user.username) if user is not None else f"user {experiment.owner_id}"


def trial_request(
    shared: MasterState, scheduler: Scheduler, trial_id: int, experiment: ExperimentRow
) -> AllocationRequest:
    """The trial's request for slots, from its experiment's config."""
    resources = experiment.config.get("resources") or {}
    priority = resources.get("priority")
    weight = resources.get("weight")
    # Its workspace's slot quota counts it (docs/scheduling.md, "Workspace quotas").
    workspace = shared.store.workspaces.of_project(experiment.project_id)
    return AllocationRequest(
        allocation_key=f"trial-{trial_id}",
        experiment_id=experiment.id,
        slots=int(resources.get("slots_per_trial", 1)),
        priority=DEFAULT_PRIORITY if priority is None else int(priority),
        max_slots=resources.get("max_slots"),
        user=owner_name(shared, experiment),
        weight=1.0 if weight is None else float(weight),
        pool=resources.get("resource_pool") or scheduler.default_pool,
        position=queue_position(experiment),
        workspace_id=workspace.id if workspace is not None else 0,
        workspace=workspace.name if workspace is not None else "",
    )


def queue_position(experiment: ExperimentRow) -> float:
    """The experiment's place in the job queue: where a user moved it, else its id (so the
    jobs of one priority go first come, first served, as Determined's queue positions do)."""
    moved = experiment.queue_position
    return float(experiment.id) if moved is None else float(moved)


def update_waiting(scheduler: Scheduler, probe: AllocationRequest) -> None:
    """The experiment's waiting requests take the values of `probe` (a request built from its
    row now): priority, max_slots, weight, queue position and pool."""
    scheduler.update_experiment(
        probe.experiment_id,
        priority=probe.priority,
        max_slots=probe.max_slots,
        weight=probe.weight,
        position=probe.position,
        pool=probe.pool,
    )


def scheduling_step(shared: MasterState, scheduler: Scheduler) -> Step:
    """One scheduling pass. With slot-hours per day configured, who is over their limit is read
    from the allocation history first (docs/scheduling.md, "Slot-hours per day"), and the pass
    is run again when the first of them waiting may run again."""
    policy = scheduler.policy
    if not policy.has_daily_limits:
        return scheduler.step()
    now = time.time()
    history = shared.store.users.slot_usage_since(now - DAY_SECONDS)
    over = over_daily_limit(history, policy.user_slot_hours_per_day, policy.slot_hours_per_day, now)
    scheduler.set_daily_usage(over)
    step = scheduler.step()
    waiting = {r.user for r in scheduler.pending()} & over.keys()
    if not waiting:
        return step
    wake = max(0.0, min(over[user][1] for user in waiting) - now)
    if step.recheck_in is not None:
        wake = min(wake, step.recheck_in)
    return dataclasses.replace(step, recheck_in=wake)


def never_fits_line(scheduler: Scheduler, trial_id: int, request: AllocationRequest) -> str | None:
    """The trial log's line for a request that no pool can ever grant, or None."""
    have = len(scheduler.pool_slots(request.pool))
    if request.slots <= have:
        return None
    if scheduler.live_shape:  # Ray: the pools follow the cluster's nodes
        return (
            f"trial {trial_id} needs {request.slots} slots but resource pool {request.pool!r} "
            f"has {have} now: it waits until nodes with more join the Ray cluster (or lower "
            "resources.slots_per_trial)"
        )
    return (
        f"trial {trial_id} needs {request.slots} slots but resource pool {request.pool!r} has "
        f"{have}: it waits until the experiment is killed (lower resources.slots_per_trial)"
    )


def rebalance_line(scheduler: Scheduler, key: str, policy: str) -> str:
    """The trial log's line for a run preempted by the scheduler."""
    grant = scheduler.granted().get(key)
    who = f" of {grant.request.user}" if grant is not None else ""
    why = (
        "a more important job (smaller resources.priority) needs its slots"
        if policy == "priority"
        else "it is above its owner's fair share and someone within theirs waits"
    )
    return (
        f"preempted by the {policy} scheduler{who}: {why}; it checkpoints, exits and waits "
        "(QUEUED) to resume from its latest checkpoint"
    )


def gpus_for(gpus: list[GPU], slot_ids: list[int]) -> list[GPU]:
    """The GPUs among a run's slots (a CPU pool's slots are none of them)."""
    by_index = {g.index: g for g in gpus}
    return [by_index[s] for s in slot_ids if s in by_index]


class RecheckTimer:
    """One pending "run the scheduler again" on the loop: when a run that blocks a waiting
    request passes the minimum run time, nothing else would wake the scheduler."""

    def __init__(self) -> None:
        self._handle: asyncio.TimerHandle | None = None
        self._at = 0.0

    def arm(
        self, loop: asyncio.AbstractEventLoop, delay: float | None, fire: Callable[[], None]
    ) -> None:
        if delay is None:
            return
        at = loop.time() + delay + 0.05  # just past the moment, not just before it
        if self._handle is not None and not self._handle.cancelled() and self._at <= at:
            return
        self.cancel()

        def fired() -> None:
            self._handle = None
            fire()

        self._at = at
        self._handle = loop.call_at(at, fired)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def log_rebalance(logs: TrialLogs, scheduler: Scheduler, trial_id: int, key: str) -> None:
    logs.master_log(trial_id, rebalance_line(scheduler, key, scheduler.policy.kind))


__all__ = [
    "REBALANCE",
    "RecheckTimer",
    "check_resource_pool",
    "gpus_for",
    "log_rebalance",
    "never_fits_line",
    "owner_name",
    "queue_position",
    "rebalance_line",
    "scheduling_step",
    "trial_request",
    "update_waiting",
]
