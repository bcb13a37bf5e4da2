"""`det job list` and `det job update` (alias `j`): the job queue (GET/POST /api/v1/job-queues;
docs/scheduling.md, "Job queue"), with Determined's names, flags and columns.

A job is an experiment; its id is `exp-<id>` (the bare experiment id is accepted too).
Determined's table shows the Priority column under the priority scheduler and Weight under fair
share; this one shows both, as the job queue's changes act on both.
"""

from __future__ import annotations

import argparse
from typing import Any

from determined.cli import _render
from determined.cli._base import CliError, Context

HEADERS = [
    "#",
    "ID",
    "Type",
    "Job Name",
    "Priority",
    "Weight",
    "Submitted",
    "Slots (acquired/needed)",
    "State",
    "User",
]


def job_name(job: dict) -> str:
    """`name (id)` for an experiment, as Determined's CLI shows it."""
    if job.get("type") == "TYPE_EXPERIMENT":
        return f"{job.get('name', '')} ({job.get('entityId', '')})"
    return str(job.get("name", ""))


def list_jobs(args: argparse.Namespace, ctx: Context) -> int:
    query: dict[str, Any] = {"offset": args.offset}
    if args.resource_pool:
        query["resourcePool"] = args.resource_pool
    if args.limit:
        query["limit"] = args.limit
    jobs = ctx.session.get("/job-queues", params=query)["jobs"]
    if args.json:
        _render.print_json({"jobs": jobs})
        return 0
    rows = [
        [
            (job.get("summary") or {}).get("jobsAhead", "N/A"),
            job["jobId"],
            job.get("type", ""),
            job_name(job),
            job.get("priority"),
            job.get("weight"),
            _render.format_time(job.get("submissionTime")),
            f"{job.get('allocatedSlots', 0)}/{job.get('requestedSlots', 0)}",
            (job.get("summary") or {}).get("state", "N/A"),
            job.get("username", ""),
        ]
        for job in jobs
    ]
    _render.print_table(HEADERS, rows, as_csv=args.csv)
    return 0


def update_job(args: argparse.Namespace, ctx: Context) -> int:
    update: dict[str, Any] = {"jobId": args.job_id}
    if args.priority is not None:
        update["priority"] = args.priority
    elif args.weight is not None:
        update["weight"] = args.weight
    elif args.resource_pool is not None:
        update["resourcePool"] = args.resource_pool
    elif args.ahead_of is not None:
        update["aheadOf"] = args.ahead_of
    elif args.behind_of is not None:
        update["behindOf"] = args.behind_of
    else:  # argparse's required group makes this unreachable; kept as a readable guard
        raise CliError(
            "det job update: give one of --priority, --weight, --resource-pool, --ahead-of, "
            "--behind-of"
        )
    ctx.session.post("/job-queues", {"updates": [update]})
    return 0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("job", aliases=["j"], help="the job queue")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("list", aliases=["ls"], help="list the jobs in queue order")
    p.add_argument("-p", "--resource-pool", help="only the jobs of this resource pool")
    p.add_argument("--offset", type=int, default=0, help="skip this many jobs first")
    p.add_argument("--limit", type=int, default=None, help="at most this many jobs")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print as JSON")
    output.add_argument("--csv", action="store_true", help="print as CSV")
    p.set_defaults(handler=list_jobs)

    u = verbs.add_parser("update", aliases=["u"], help="change a job's place, priority or pool")
    u.add_argument("job_id", help="the job to change: exp-<id> (or the experiment id)")
    action = u.add_mutually_exclusive_group(required=True)
    action.add_argument("-p", "--priority", type=int, help="the new priority (1-99)")
    action.add_argument("-w", "--weight", type=float, help="the new fair share weight")
    action.add_argument("--resource-pool", help="move its waiting trials to this pool")
    action.add_argument("--ahead-of", metavar="JOB_ID", help="put it just before this job")
    action.add_argument(
        "--behind-of", "--behind", metavar="JOB_ID", help="put it just after this job"
    )
    u.set_defaults(handler=update_job)
