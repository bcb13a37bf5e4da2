"""`det task`: Determined's tasks, as far as this master has them.

Determined's tasks are its allocations: trials, commands, notebooks, shells and TensorBoards
(and, since 0.26, generic tasks made by `det task create`). This master runs trials and
TensorBoards only, so:

* `det task list` lists those that hold or wait for slots: every ACTIVE trial of an ACTIVE
  experiment (task id `trial-<id>`, what `DET_TASK_ID` says inside it) and every running
  TensorBoard, in Determined's columns;
* `det task logs trial-<id>` is `det trial logs <id>` (same options), `det task kill trial-<id>`
  is `det trial kill <id>`;
* generic tasks (`create`, `config`, `fork`, `pause`, `unpause`) and `cleanup-logs` are refused
  with what to use instead: an experiment whose entrypoint is the command (it gets slots, logs,
  a kill), or a terminal or kernel in JupyterLab.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from determined.cli import _render, _trial
from determined.cli._base import Context

HEADERS = [
    "Task ID",
    "Allocation ID",
    "Name",
    "Slots Needed",
    "Registered Time",
    "Agent",
    "Priority",
    "Resource Pool",
    "Ports",
]

GENERIC_TASKS_REFUSAL = (
    "det task {verb}: generic tasks are not supported by master-lite (it runs trials and "
    "TensorBoards only). Run the command as an experiment instead (entrypoint: your command, "
    "searcher: {{name: single, metric: x, max_length: 1}}): it gets slots, logs (det trial logs), "
    "and a kill; or run it in a JupyterLab terminal or kernel"
)


def task_rows(ctx: Context) -> list[dict[str, Any]]:
    """Every task that holds or waits for slots, as Determined's allocation summaries."""
    tasks: list[dict[str, Any]] = []
    for listed in ctx.session.get("/experiments", {"state": "ACTIVE"})["experiments"]:
        experiment = ctx.session.get(f"/experiments/{listed['id']}")["experiment"]
        resources = (experiment.get("config") or {}).get("resources") or {}
        trials = ctx.session.get(f"/experiments/{listed['id']}/trials")["trials"]
        for trial in trials:
            if trial["state"] != "ACTIVE" or experiment.get("unmanaged"):
                continue
            running = trial.get("allocation_id") is not None
            tasks.append(
                {
                    "taskId": f"trial-{trial['id']}",
                    "allocationId": trial.get("allocation_id") or "",
                    "name": f"Trial {trial['id']} (Experiment {listed['id']}: {listed['name']})",
                    "slotsNeeded": int(resources.get("slots_per_trial", 1)),
                    "registeredTime": trial.get("start_time") or "",
                    "agent": f"slots {','.join(map(str, trial['slot_ids']))}"
                    if running
                    else "unassigned",
                    "priority": resources.get("priority", "N/A"),
                    "resourcePool": resources.get("resource_pool") or "default",
                    "state": "RUNNING" if running else "QUEUED",
                }
            )
    for board in ctx.session.get("/tensorboards")["tensorboards"]:
        if board.get("state") in ("STATE_RUNNING", "STATE_STARTING"):
            tasks.append(
                {
                    "taskId": board["id"],
                    "allocationId": board["id"],
                    "name": f"TensorBoard (Experiments {','.join(map(str, board['experimentIds']))})",
                    "slotsNeeded": 0,
                    "registeredTime": "",
                    "agent": "master",
                    "priority": "N/A",
                    "resourcePool": "default",
                    "state": board["state"][len("STATE_") :],
                }
            )
    return tasks


def list_tasks(args: argparse.Namespace, ctx: Context) -> int:
    tasks = task_rows(ctx)
    if args.json:
        _render.print_json({t["taskId"]: t for t in tasks})
        return 0
    rows = [
        [
            t["taskId"],
            t["allocationId"],
            t["name"],
            t["slotsNeeded"],
            _render.format_time(t["registeredTime"]) if t["registeredTime"] else "",
            t["agent"],
            t["priority"],
            t["resourcePool"],
            "",
        ]
        for t in tasks
    ]
    _render.print_table(HEADERS, rows, as_csv=args.csv)
    return 0


def trial_of_task(task_id: str, verb: str) -> int:
    """The trial id of task `trial-<id>`; ValueError naming what to pass otherwise."""
    prefix, _, number = task_id.partition("-")
    if prefix != "trial" or not number.isdigit():
        raise ValueError(
            f"det task {verb}: {task_id!r} is not a trial's task here (trial-<id>, as "
            "`det task list` shows); TensorBoards: det tensorboard list / kill"
        )
    return int(number)


def logs(args: argparse.Namespace, ctx: Context) -> int:
    try:
        args.trial_id = trial_of_task(args.task_id, "logs")
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    return _trial.logs(args, ctx)


def kill(args: argparse.Namespace, ctx: Context) -> int:
    try:
        args.trial_id = trial_of_task(args.task_id, "kill")
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    return _trial.kill(args, ctx)


def refuse(args: argparse.Namespace, ctx: Context) -> int:
    print(GENERIC_TASKS_REFUSAL.format(verb=args.verb), file=sys.stderr)
    return 2


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("task", help="tasks: the trials and TensorBoards on slots")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", aliases=["ls"], help="tasks that hold or wait for slots")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print as JSON")
    output.add_argument("--csv", action="store_true", help="print as CSV")
    p.set_defaults(handler=list_tasks, verb="list")

    p = verbs.add_parser("logs", help="a trial task's logs (det trial logs)")
    p.add_argument("task_id", metavar="TASK_ID", help="trial-<id>, as det task list shows")
    _trial.add_log_arguments(p)
    p.set_defaults(handler=logs)

    p = verbs.add_parser("kill", help="kill a trial task (det trial kill)")
    p.add_argument("task_id", metavar="TASK_ID", help="trial-<id>, as det task list shows")
    p.set_defaults(handler=kill)

    for verb in ("create", "config", "fork", "pause", "unpause", "cleanup-logs"):
        p = verbs.add_parser(verb, help="not supported here (generic tasks): says what to use")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(handler=refuse, verb=verb)
