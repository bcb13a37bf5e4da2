"""The job queue endpoints (Determined's `GET/POST /api/v1/job-queues`; docs/scheduling.md,
"Job queue"). The queue and its changes are the job queue part's (`master.edits.job_queue`)."""

from __future__ import annotations

from typing import Any

from master_lite import errors
from master_lite.api._base import ApiHandlerMixin
from master_lite.api._declarations import Listing, Operation, Param, Route
from master_lite.api._permissions import check_owner
from master_lite.api._reads import check_readable
from master_lite.api._schema_types import (
    BOOLEAN,
    EMPTY,
    INTEGER,
    NUMBER,
    STRING,
    TIME,
    array,
    nullable,
    obj,
    ref,
)
from master_lite.experiments import parse_job_id

JOB_ID = {**STRING, "description": "exp-<experiment id> (the bare experiment id is accepted)"}
# Determined's jobv1.Job, with our `position` and `waitReason` (components/schemas/Job).
JOB_SCHEMA = obj(
    ["jobId", "type", "entityId", "name", "resourcePool", "summary", "position"],
    jobId=JOB_ID,
    type={**STRING, "enum": ["TYPE_EXPERIMENT"]},
    entityId={**STRING, "description": "the experiment id"},
    name={**STRING, "description": "the experiment's name"},
    username=STRING,
    userId=INTEGER,
    workspaceId=INTEGER,
    resourcePool=STRING,
    isPreemptible=BOOLEAN,
    priority={**INTEGER, "description": "resources.priority (smaller: more important)"},
    weight={**NUMBER, "description": "resources.weight (its fair share weight)"},
    requestedSlots={**INTEGER, "description": "slots its waiting and running trials need"},
    allocatedSlots={**INTEGER, "description": "slots its trials hold"},
    submissionTime=TIME,
    progress=nullable(NUMBER),
    summary=obj(
        ["state", "jobsAhead"],
        state={**STRING, "enum": ["STATE_QUEUED", "STATE_SCHEDULED"]},
        jobsAhead={**INTEGER, "description": "jobs before it in its pool's queue"},
    ),
    position={**INTEGER, "description": "1-based rank in its pool's queue (ours)"},
    waitReason=nullable(
        {**STRING, "description": "why its first waiting trial waits, in words (ours)"}
    ),
)
QUEUE_CONTROL = {
    **obj(
        ["jobId"],
        jobId=JOB_ID,
        priority={**INTEGER, "minimum": 1, "maximum": 99},
        weight={**NUMBER, "description": "> 0"},
        aheadOf={**JOB_ID, "description": "put it just before this job (same pool)"},
        behindOf={**JOB_ID, "description": "put it just after this job (same pool)"},
        resourcePool={**STRING, "description": "its waiting trials wait in this pool"},
    ),
    "additionalProperties": False,
    "description": "one action per update (Determined's QueueControl)",
}
PAGINATION = obj(offset=INTEGER, limit=INTEGER, startIndex=INTEGER, endIndex=INTEGER, total=INTEGER)


class JobQueuesHandler(ApiHandlerMixin):
    async def get(self) -> None:
        self.send_json(
            self.master.edits.job_queue.list_jobs(
                self.args["resourcePool"], self.args["offset"] or 0, self.args["limit"]
            )
        )

    async def post(self) -> None:
        updates: list[dict[str, Any]] = self.body["updates"]
        # Before anything changes: the read rule for every job named (another's job is as
        # none to a narrowed reader: 404), then the owner rule for the jobs changed (403).
        # Bad ids are the part's 400.
        for n, update in enumerate(updates):
            try:
                exp_id = parse_job_id(update.get("jobId"), "jobId")
                anchors = [
                    parse_job_id(update[key], key)
                    for key in ("aheadOf", "behindOf")
                    if update.get(key) is not None
                ]
            except errors.InvalidRequest:
                continue
            try:
                check_readable(self.master, self.principal, "experiment", [exp_id, *anchors])
                check_owner(self.master, self.principal, "experiment", exp_id, "update")
            except errors.NotFound as exc:
                raise errors.NotFound(
                    f"body.updates[{n}]: {exc} (det job list shows the jobs)"
                ) from None
        self.send_json(self.master.edits.job_queue.update(updates))


JOB_QUEUE_ROUTES: tuple[Route, ...] = (
    Route(
        "/job-queues",
        JobQueuesHandler,
        {
            "get": Operation(
                "The job queue (Determined's GetJobs): active experiments with trials that wait "
                "or run, per pool in queue order (priority, queue position, arrival)",
                obj(["jobs", "pagination"], jobs=array(ref("Job")), pagination=PAGINATION),
                reads=Listing("jobs", "experiment"),
                query=(
                    Param("resourcePool", "string", "only the jobs of this pool"),
                    Param("offset", "integer", "skip this many jobs first", minimum=0),
                    Param("limit", "integer", "at most this many jobs", minimum=1),
                ),
            ),
            "post": Operation(
                "Change jobs (Determined's UpdateJobQueue): priority, weight, place in the "
                "queue (aheadOf/behindOf a job of the same pool) or resource pool; the owner "
                "of each job or an admin",
                EMPTY,
                request=obj(["updates"], updates={**array(QUEUE_CONTROL), "minItems": 1}),
                description=(
                    "All updates are checked before any is made: 403 for another user's job, "
                    "404 for an unknown one, 400 for a finished one, a job of another pool, or "
                    "an update naming not exactly one action"
                ),
            ),
        },
    ),
)

__all__ = ["JOB_QUEUE_ROUTES", "JOB_SCHEMA"]
