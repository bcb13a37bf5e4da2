"""The job queue (Determined's `GET/POST /api/v1/job-queues`, `det job list/update`): the
scheduler's queue grouped by experiment, and the changes a user makes to it.

A job is an ACTIVE experiment with a trial that waits for slots, holds them or is giving them
back; a finished experiment leaves the queue. Jobs are listed per pool in queue order: priority
(smaller first), then queue position, then the arrival of their first request; `position` is
the 1-based rank in the pool (`summary.jobsAhead` = position - 1).

Changes (Determined's QueueControl, one action per update), all checked before any is made:
* `priority` / `weight`: the experiment's `resources.priority` / `resources.weight`, through the
  same path as `det experiment set priority/weight` (config updated, waiting trials reordered).
* `aheadOf` / `behindOf` another job of the same pool: the job's queue position (persisted in
  the store) goes just before / after that job's; a job of another priority first takes the
  anchor's priority, as Determined's did, so that the move takes effect.
* `resourcePool`: the experiment's `resources.resource_pool`; its waiting trials wait in the
  new pool, its running ones finish where they run.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

from determined.common.states import TERMINAL_EXPERIMENT_STATES, ExperimentState
from master_lite import errors
from master_lite._core._serialize import iso
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.runs._runs import Runs
from master_lite.runs._scheduling import owner_name, trial_request
from master_lite.scheduler import AllocationRequest, QueueEntry
from master_lite.store import ExperimentRow

# The actions of one update (Determined's QueueControl fields), in the order they are named.
ACTIONS = ("priority", "weight", "aheadOf", "behindOf", "resourcePool")
_JOB_ID = re.compile(r"^(?:exp-)?([0-9]{1,18})$")


def job_id(experiment_id: int) -> str:
    """An experiment's job id: `exp-<id>` (Determined's job ids are opaque strings)."""
    return f"exp-{experiment_id}"


def parse_job_id(text: Any, where: str) -> int:
    """The experiment id of a job id (`exp-3` or `3`); InvalidRequest naming `where`."""
    match = _JOB_ID.match(text) if isinstance(text, str) else None
    if match is None:
        raise errors.InvalidRequest(
            f"{where}: expected a job id such as 'exp-3' (or the experiment id '3'), got "
            f"{text!r} (det job list shows the job ids)"
        )
    return int(match.group(1))


@dataclasses.dataclass
class _Job:
    """One job of the queue and what it sorts by."""

    row: ExperimentRow
    entries: list[QueueEntry]
    pool: str
    priority: int
    weight: float
    position: float
    first: int  # the arrival order of its first request
    rank: int = 0  # 1-based, in its pool


class JobQueue:
    """Reads and reorders the job queue (docs/scheduling.md, "Job queue")."""

    def __init__(
        self,
        shared: MasterState,
        *,
        views: Views,
        runs: Runs,
        edit_resources: Callable[[int, dict[str, Any]], Any],
    ) -> None:
        self._shared = shared
        self._views = views
        self._runs = runs
        # ExperimentEdits.patch_experiment(exp_id, resources=...): `det e set priority`'s path.
        self._edit_resources = edit_resources

    # -- reading ------------------------------------------------------------------------------
    def _probe(self, row: ExperimentRow) -> AllocationRequest:
        """What the experiment's next request would carry (pool, priority, position...)."""
        return trial_request(self._shared, self._runs.scheduler, 0, row)

    def _jobs(self) -> list[_Job]:
        """Every job, grouped per pool and in queue order, with the values they sort by."""
        entries: dict[int, list[QueueEntry]] = {}
        for entry in self._runs.scheduler.queue():
            entries.setdefault(entry.experiment_id, []).append(entry)
        jobs = []
        for exp_id, mine in entries.items():
            row = self._shared.store.experiments.get(exp_id)
            if row is None or row.state != ExperimentState.ACTIVE:
                continue
            probe = self._probe(row)
            first = min(e.order for e in mine)
            jobs.append(
                _Job(row, mine, probe.pool, probe.priority, probe.weight, probe.position, first)
            )
        jobs.sort(key=lambda j: (j.pool, j.priority, j.position, j.first))
        rank: dict[str, int] = {}
        for job in jobs:
            rank[job.pool] = job.rank = rank.get(job.pool, 0) + 1
        return jobs

    def list_jobs(self, pool: str | None = None, offset: int = 0, limit: int | None = None) -> dict:
        """`GET /api/v1/job-queues`: the jobs (of `pool`, else of every pool) in queue order."""
        scheduler = self._runs.scheduler
        if pool and pool not in scheduler.pools:
            raise errors.InvalidRequest(
                f"resourcePool: {pool!r} is not a resource pool of this master (pools: "
                f"{', '.join(scheduler.pools)}; `det resource-pool list` shows them)"
            )
        jobs = [job for job in self._jobs() if not pool or job.pool == pool]
        total = len(jobs)
        page = jobs[offset:] if limit is None else jobs[offset : offset + limit]
        workspaces: dict[int, int] = {}
        answer = [self._job_json(job, workspaces) for job in page]
        return {
            "jobs": answer,
            "pagination": {
                "offset": offset,
                "limit": len(answer) if limit is None else limit,
                "startIndex": offset,
                "endIndex": offset + len(answer),
                "total": total,
            },
        }

    def _job_json(self, job: _Job, workspaces: dict[int, int]) -> dict:
        row, entries = job.row, job.entries
        if row.project_id not in workspaces:
            project = self._shared.store.projects.get(row.project_id)
            workspaces[row.project_id] = project.workspace_id if project is not None else 1
        held = sum(e.slots_held for e in entries)
        scheduled = any(e.state != "QUEUED" for e in entries)
        waits = any(e.state == "QUEUED" for e in entries)
        return {
            "jobId": job_id(row.id),
            "type": "TYPE_EXPERIMENT",
            "entityId": str(row.id),
            "name": row.name,
            "username": owner_name(self._shared, row),
            "userId": row.owner_id,
            "workspaceId": workspaces[row.project_id],
            "resourcePool": job.pool,
            # Every experiment checkpoints and resumes: the scheduler may preempt its runs.
            "isPreemptible": True,
            "priority": job.priority,
            "weight": job.weight,
            "requestedSlots": sum(e.slots_requested for e in entries),
            "allocatedSlots": held,
            "submissionTime": iso(row.start_time),
            "progress": row.progress,
            "summary": {
                "state": "STATE_SCHEDULED" if scheduled else "STATE_QUEUED",
                "jobsAhead": job.rank - 1,
            },
            "position": job.rank,
            "waitReason": (self._runs.scheduler.experiment_wait_reason(row.id) if waits else None),
        }

    # -- changing -----------------------------------------------------------------------------
    def update(self, updates: list[dict]) -> dict:
        """`POST /api/v1/job-queues`: every update is checked (400/404 naming it) before any is
        made; then they are made in order. The owner rule is the caller's (the API's)."""
        plans = [self._check(update, f"body.updates[{n}]") for n, update in enumerate(updates)]
        for plan in plans:
            self._apply(*plan)
        return {}

    def _row(self, exp_id: int, where: str) -> Any:
        row = self._shared.store.experiments.get(exp_id)
        if row is None:
            raise errors.NotFound(f"{where}: job {job_id(exp_id)} not found (det job list)")
        return row

    def _check(self, update: dict, where: str) -> tuple[int, str, Any]:
        exp_id = parse_job_id(update.get("jobId"), f"{where}.jobId")
        named = [action for action in ACTIONS if update.get(action) is not None]
        if len(named) != 1:
            raise errors.InvalidRequest(
                f"{where}: name exactly one of {', '.join(ACTIONS)} per update (Determined's "
                f"QueueControl), got {', '.join(named) or 'none'}; send several updates instead"
            )
        action, value = named[0], update[named[0]]
        row = self._row(exp_id, f"{where}.jobId")
        if row.state in TERMINAL_EXPERIMENT_STATES:
            raise errors.InvalidRequest(
                f"{where}.jobId: job {job_id(exp_id)} is finished ({row.state}): it has left the "
                "queue and cannot be changed"
            )
        if action == "priority" and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 99
        ):
            raise errors.InvalidRequest(
                f"{where}.priority: must be an integer between 1 and 99 (smaller is more "
                f"important), got {value!r}"
            )
        if action == "weight" and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise errors.InvalidRequest(f"{where}.weight: must be a number > 0, got {value!r}")
        if action == "resourcePool":
            self._check_pool(row, value, f"{where}.resourcePool")
        if action in ("aheadOf", "behindOf"):
            value = self._check_anchor(row, value, f"{where}.{action}")
        return exp_id, action, value

    def _check_pool(self, row: Any, pool: Any, where: str) -> None:
        scheduler = self._runs.scheduler
        if not isinstance(pool, str) or pool not in scheduler.pools:
            raise errors.InvalidRequest(
                f"{where}: {pool!r} is not a resource pool of this master (pools: "
                f"{', '.join(scheduler.pools)}; `det resource-pool list` shows them)"
            )
        slots = self._probe(row).slots
        if slots > len(scheduler.pool_slots(pool)):
            raise errors.InvalidRequest(
                f"{where}: job {job_id(row.id)} needs {slots} slots per trial but pool {pool!r} "
                f"has {len(scheduler.pool_slots(pool))}; it could never start there"
            )

    def _check_anchor(self, row: Any, anchor: Any, where: str) -> int:
        anchor_id = parse_job_id(anchor, where)
        if anchor_id == row.id:
            raise errors.InvalidRequest(f"{where}: a job cannot be moved relative to itself")
        self._row(anchor_id, where)  # 404 for no such job
        queued = {job.row.id: job for job in self._jobs()}
        if anchor_id not in queued:
            raise errors.InvalidRequest(
                f"{where}: job {job_id(anchor_id)} is not in the queue (only active experiments "
                "with trials that wait or run are; det job list shows them)"
            )
        pool, anchor_pool = self._probe(row).pool, queued[anchor_id].pool
        if pool != anchor_pool:
            raise errors.InvalidRequest(
                f"{where}: job {job_id(anchor_id)} is in resource pool {anchor_pool!r} and job "
                f"{job_id(row.id)} in {pool!r}: a job moves only among the jobs of its pool "
                "(change its pool first: det job update --resource-pool)"
            )
        return anchor_id

    def _apply(self, exp_id: int, action: str, value: Any) -> None:
        if action == "priority":
            self._edit_resources(exp_id, {"priority": value})
        elif action == "weight":
            self._edit_resources(exp_id, {"weight": float(value)})
        elif action == "resourcePool":
            row = self._views.experiment_row(exp_id)
            config = copy.deepcopy(row.config)
            config.setdefault("resources", {})["resource_pool"] = value
            with self._shared.atomic():
                self._shared.store.experiments.set_config(exp_id, config)
            self._runs.reprioritize(exp_id)
            self._views.publish_experiment(exp_id)
        else:
            self._move(exp_id, value, ahead=action == "aheadOf")

    def _move(self, exp_id: int, anchor_id: int, *, ahead: bool) -> None:
        jobs = self._jobs()
        anchor = next(job for job in jobs if job.row.id == anchor_id)
        if self._probe(self._views.experiment_row(exp_id)).priority != anchor.priority:
            # Determined's move: a job placed among jobs of another priority takes theirs.
            self._edit_resources(exp_id, {"priority": anchor.priority})
        position = self._place(exp_id, anchor, jobs, ahead=ahead)
        if position is None:  # no room left between the two: number the group afresh
            self._renumber(exp_id, anchor, jobs)
            jobs = self._jobs()
            anchor = next(job for job in jobs if job.row.id == anchor_id)
            position = self._place(exp_id, anchor, jobs, ahead=ahead)
        assert position is not None  # a renumbered group has room between any two jobs
        self._set_position(exp_id, position)

    @staticmethod
    def _group(exp_id: int, anchor: _Job, jobs: list[_Job]) -> list[_Job]:
        """The jobs of the anchor's pool and priority, but the one moved, in queue order."""
        return [
            job
            for job in jobs
            if job.pool == anchor.pool and job.priority == anchor.priority and job.row.id != exp_id
        ]

    def _place(self, exp_id: int, anchor: _Job, jobs: list[_Job], *, ahead: bool) -> float | None:
        """The position just before (`ahead`) or after the anchor, or None without room."""
        group = self._group(exp_id, anchor, jobs)
        index = group.index(anchor)
        here = float(anchor.position)
        neighbour = group[index - 1] if ahead and index > 0 else None
        if not ahead and index + 1 < len(group):
            neighbour = group[index + 1]
        if neighbour is None:
            return here - 1.0 if ahead else here + 0.5
        middle = (here + float(neighbour.position)) / 2
        low, high = sorted((here, float(neighbour.position)))
        return middle if low < middle < high else None

    def _renumber(self, exp_id: int, anchor: _Job, jobs: list[_Job]) -> None:
        group = self._group(exp_id, anchor, jobs)
        base = float(group[0].position)
        for n, job in enumerate(group):
            self._set_position(job.row.id, base + n / len(group))

    def _set_position(self, exp_id: int, position: float) -> None:
        with self._shared.atomic():
            self._shared.store.experiments.set_queue_position(exp_id, position)
        self._runs.reprioritize(exp_id)


__all__ = ["ACTIONS", "JobQueue", "job_id", "parse_job_id"]
