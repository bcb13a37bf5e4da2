"""`det checkpoint ...` (alias `c`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from determined.cli import _render
from determined.cli._base import CliError, Context

CHECKPOINT_HEADERS = [
    "UUID",
    "Trial ID",
    "Steps Completed",
    "State",
    "Validation Metrics",
    "Metadata",
]


def render_checkpoints(checkpoints: list[dict], *, as_json: bool) -> int:
    if as_json:
        _render.print_json(checkpoints)
        return 0
    rows = [
        [
            c["uuid"],
            c.get("trial_id"),
            c.get("steps_completed"),
            c.get("state"),
            c.get("validation_metrics"),
            c.get("metadata"),
        ]
        for c in checkpoints
    ]
    print(_render.format_table(CHECKPOINT_HEADERS, rows))
    return 0


def list_checkpoints(args: argparse.Namespace, ctx: Context) -> int:
    checkpoints = ctx.session.get(f"/experiments/{args.experiment_id}/checkpoints")["checkpoints"]
    return render_checkpoints(checkpoints, as_json=args.json)


def describe_text(checkpoint: dict) -> str:
    record = _render.format_record(
        [
            ("UUID", checkpoint["uuid"]),
            ("Experiment ID", checkpoint.get("experiment_id")),
            ("Trial ID", checkpoint.get("trial_id")),
            ("Steps completed", checkpoint.get("steps_completed")),
            ("State", checkpoint.get("state")),
            ("Reported", _render.format_time(checkpoint.get("report_time"))),
            ("Storage path", checkpoint.get("path")),
            ("Metadata", checkpoint.get("metadata")),
            ("Validation metrics", checkpoint.get("validation_metrics")),
        ]
    )
    resources = checkpoint.get("resources") or {}
    files = _render.format_table(["File", "Size"], sorted(resources.items()))
    return f"{record}\n\nFiles:\n{files}"


def describe(args: argparse.Namespace, ctx: Context) -> int:
    checkpoint = ctx.session.get(f"/checkpoints/{args.uuid}")["checkpoint"]
    if args.json:
        _render.print_json(checkpoint)
    else:
        print(describe_text(checkpoint))
    return 0


def download(args: argparse.Namespace, ctx: Context) -> int:
    """`det checkpoint download`: the SDK's `Checkpoint.download`, as in Determined."""
    from determined import errors as det_errors
    from determined.common.experimental import checkpoint as sdk_checkpoint

    answer = ctx.session.get(f"/checkpoints/{args.uuid}")["checkpoint"]
    checkpoint = sdk_checkpoint.Checkpoint._from_json(answer, ctx.session)
    try:
        dest = checkpoint.download(args.output_dir, mode=sdk_checkpoint.DownloadMode(args.mode))
    except (det_errors.CheckpointStateException, det_errors.NoDirectStorageAccess) as e:
        raise CliError(str(e)) from e
    if args.quiet:
        print(os.fspath(dest))
    else:
        print(f"Local checkpoint path:\n{dest}\n")
        print(describe_text(answer))
    return 0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "checkpoint", aliases=["c"], help="list and download checkpoints"
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", aliases=["ls"], help="checkpoints of an experiment")
    p.add_argument("experiment_id", type=int, metavar="EXPERIMENT_ID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=list_checkpoints)

    p = verbs.add_parser("describe", help="one checkpoint")
    p.add_argument("uuid", metavar="UUID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=describe)

    p = verbs.add_parser("download", help="download a checkpoint (default: checkpoints/<uuid>)")
    p.add_argument("uuid", metavar="UUID")
    p.add_argument("-o", "--output-dir", metavar="DIR")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the local path")
    p.add_argument(
        "--mode",
        choices=["auto", "direct", "master"],
        default="auto",
        help="direct: read the storage path here; master: stream through the master",
    )
    p.set_defaults(handler=download)
