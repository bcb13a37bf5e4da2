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


def render_checkpoints(checkpoints: list[dict], *, as_json: bool, as_csv: bool = False) -> int:
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
    _render.print_table(CHECKPOINT_HEADERS, rows, as_csv=as_csv)
    return 0


def list_checkpoints(args: argparse.Namespace, ctx: Context) -> int:
    checkpoints = ctx.session.get(f"/experiments/{args.experiment_id}/checkpoints")["checkpoints"]
    return render_checkpoints(checkpoints, as_json=args.json, as_csv=args.csv)


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


DOWNLOADABLE_STATES = ("COMPLETED", "PARTIALLY_DELETED")


def download_checkpoint(
    ctx: Context, checkpoint: dict, *, output_dir: str | None, mode: str, quiet: bool
) -> int:
    """Download `checkpoint` (the API's object) with the SDK's `Checkpoint.download` and print
    where; shared by `det checkpoint download` and `det trial download`. The default directory
    is Determined's CLI default, `checkpoints/<uuid>` under the current directory (the SDK's
    own default is the user's cache: a shell user asked for the files here)."""
    from determined import errors as det_errors
    from determined.common.experimental import checkpoint as sdk_checkpoint

    sdk = sdk_checkpoint.Checkpoint._from_json(checkpoint, ctx.session)
    try:
        if output_dir is None:
            output_dir = os.path.join("checkpoints", str(sdk.uuid))
        dest = sdk.download(output_dir, mode=sdk_checkpoint.DownloadMode(mode))
    except (det_errors.CheckpointStateException, det_errors.NoDirectStorageAccess) as e:
        raise CliError(str(e)) from e
    if quiet:
        print(os.fspath(dest))
    else:
        print(f"Local checkpoint path:\n{dest}\n")
        print(describe_text(checkpoint))
    return 0


def download(args: argparse.Namespace, ctx: Context) -> int:
    """`det checkpoint download`: the SDK's `Checkpoint.download`, as in Determined."""
    checkpoint = ctx.session.get(f"/checkpoints/{args.uuid}")["checkpoint"]
    return download_checkpoint(
        ctx, checkpoint, output_dir=args.output_dir, mode=args.mode, quiet=args.quiet
    )


def add_download_arguments(parser: argparse.ArgumentParser) -> None:
    """-o/--output-dir, -q/--quiet and --mode, as `det checkpoint download` has them."""
    parser.add_argument("-o", "--output-dir", metavar="DIR")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the local path")
    parser.add_argument(
        "--mode",
        choices=["auto", "direct", "master"],
        default="auto",
        help="direct: read the storage path here; master: stream through the master",
    )


def add_list_output_arguments(parser: argparse.ArgumentParser) -> None:
    """--json or --csv (the default is a table)."""
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print as JSON")
    output.add_argument("--csv", action="store_true", help="print as CSV")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "checkpoint", aliases=["c"], help="list and download checkpoints"
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", aliases=["ls"], help="checkpoints of an experiment")
    p.add_argument("experiment_id", type=int, metavar="EXPERIMENT_ID")
    add_list_output_arguments(p)
    p.set_defaults(handler=list_checkpoints)

    p = verbs.add_parser("describe", help="one checkpoint")
    p.add_argument("uuid", metavar="UUID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=describe)

    p = verbs.add_parser("download", help="download a checkpoint (default: checkpoints/<uuid>)")
    p.add_argument("uuid", metavar="UUID")
    add_download_arguments(p)
    p.set_defaults(handler=download)
