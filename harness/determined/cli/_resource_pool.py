"""`det resource-pool list` (alias `rp`): the master's resource pools (GET /api/v1/resource-pools).

Determined's `det resource-pool` has workspace bindings only (its pools are listed by `det
agent list`); master-lite adds `list`, since pools here are a master setting users need to
name in `resources.resource_pool` (docs/scheduling.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from determined.cli import _render
from determined.cli._base import Context

HEADERS = ["Name", "Description", "Slot Type", "Slots", "Used", "Scheduler", "Default"]


def list_pools(args: argparse.Namespace, ctx: Context) -> int:
    pools = ctx.session.get("/resource-pools")["resourcePools"]
    if args.json:
        _render.print_json(pools)
        return 0
    rows = [
        [
            pool["name"],
            pool.get("description", ""),
            str(pool.get("slotType", "")).replace("TYPE_", "").lower(),
            pool.get("slotsAvailable", 0),
            pool.get("slotsUsed", 0),
            str(pool.get("schedulerType", "")).replace("SCHEDULER_TYPE_", "").lower(),
            "yes" if pool.get("defaultComputePool") else "",
        ]
        for pool in pools
    ]
    _render.print_table(HEADERS, rows, as_csv=args.csv)
    return 0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "resource-pool", aliases=["rp"], help="the master's resource pools"
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("list", aliases=["ls"], help="list the resource pools and their slots")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print as JSON")
    output.add_argument("--csv", action="store_true", help="print as CSV")
    p.set_defaults(handler=list_pools)
