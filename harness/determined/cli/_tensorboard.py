"""`det tensorboard ...` (alias `tb`): TensorBoards the master runs on trials' metrics."""

from __future__ import annotations

import argparse
import time
from typing import Any

from determined.cli import _render
from determined.cli._base import CliError, Context
from determined.common import api

HEADERS = ["ID", "State", "Experiment IDs", "Trial IDs", "URL"]
# TensorBoard loads its plugins before it serves: seconds, more on a busy machine.
START_TIMEOUT_SECONDS = 180.0


def start(args: argparse.Namespace, ctx: Context) -> int:
    if not args.experiment_ids and not args.trial_ids:
        raise CliError(
            "give experiment ids (det tensorboard start 3 4) or trial ids "
            "(det tensorboard start -t 7 8), or both"
        )
    board = ctx.session.post(
        "/tensorboards",
        {"experiment_ids": args.experiment_ids or [], "trial_ids": args.trial_ids or []},
    )["tensorboard"]
    if args.detach:
        print(board["id"])
        return 0
    board = wait_running(ctx, board)
    print(f"TensorBoard is running at: {board['serviceAddress']}")
    print(f"(stop it with: det tensorboard kill {board['id']})")
    return 0


def wait_running(ctx: Context, board: dict, timeout: float = START_TIMEOUT_SECONDS) -> dict:
    """Poll the TensorBoard until it serves; CliError when it stopped or took too long."""
    deadline = time.monotonic() + timeout
    while board["state"] == "STATE_STARTING":
        if time.monotonic() > deadline:
            raise CliError(
                f"TensorBoard {board['id']} did not start serving within {timeout:.0f} s; "
                f"see `det tensorboard list`, or stop it with `det tensorboard kill {board['id']}`"
            )
        time.sleep(0.5)
        board = ctx.session.get(f"/tensorboards/{board['id']}")["tensorboard"]
    if board["state"] != "STATE_RUNNING":
        raise CliError(f"TensorBoard {board['id']} stopped: {board.get('error') or 'no reason'}")
    return board


def list_tensorboards(args: argparse.Namespace, ctx: Context) -> int:
    boards = ctx.session.get("/tensorboards")["tensorboards"]
    if args.json:
        _render.print_json(boards)
    elif args.quiet:
        for board in boards:
            print(board["id"])
    else:
        rows = [
            [
                b["id"],
                b["state"],
                ",".join(map(str, b["experimentIds"])),
                ",".join(map(str, b["trialIds"])),
                b["serviceAddress"],
            ]
            for b in boards
        ]
        _render.print_table(HEADERS, rows, as_csv=False)
    return 0


def open_tensorboard(args: argparse.Namespace, ctx: Context) -> int:
    board = ctx.session.get(f"/tensorboards/{args.tensorboard_id}")["tensorboard"]
    print(wait_running(ctx, board)["serviceAddress"])
    return 0


def kill(args: argparse.Namespace, ctx: Context) -> int:
    failed = 0
    for tensorboard_id in args.tensorboard_id:
        try:
            board = ctx.session.post(f"/tensorboards/{tensorboard_id}/kill")["tensorboard"]
        except api.APIError as e:
            if not args.force:
                raise
            print(f"TensorBoard {tensorboard_id}: {e}")
            failed += 1
            continue
        print(f"TensorBoard {board['id']}: stopped")
    return 0 if failed == 0 or args.force else 1


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tensorboard", aliases=["tb"], help="TensorBoards on experiments' and trials' metrics"
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", aliases=["ls"], help="the running TensorBoards")
    p.add_argument("-q", "--quiet", action="store_true", help="only the ids")
    p.add_argument("--all", "-a", action="store_true", help="accepted (master-lite has one user)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=list_tensorboards)

    p = verbs.add_parser("start", help="start a TensorBoard and print its URL once it serves")
    p.add_argument(
        "experiment_ids", type=int, nargs="*", metavar="EXPERIMENT_ID", help="every trial of these"
    )
    p.add_argument("-t", "--trial-ids", type=int, nargs="+", metavar="TRIAL_ID", help="and these")
    p.add_argument(
        "--no-browser",
        action="store_true",
        help="accepted for Determined's scripts: the URL is printed, no browser is opened",
    )
    p.add_argument("-d", "--detach", action="store_true", help="print the id and return at once")
    p.set_defaults(handler=start)

    p = verbs.add_parser("open", help="print the URL of a TensorBoard")
    p.add_argument("tensorboard_id", metavar="TENSORBOARD_ID")
    p.set_defaults(handler=open_tensorboard)

    p = verbs.add_parser("kill", help="stop TensorBoards")
    p.add_argument("tensorboard_id", nargs="+", metavar="TENSORBOARD_ID")
    p.add_argument("-f", "--force", action="store_true", help="go on past errors")
    p.set_defaults(handler=kill)
