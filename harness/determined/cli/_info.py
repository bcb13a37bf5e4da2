"""`det version` and `det master info`: what this client and the master are."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from determined.cli import _render
from determined.cli._base import Context
from determined.common import api


def client_version() -> str:
    try:
        import determined

        return str(determined.__version__)
    except (ImportError, AttributeError):
        return "unknown"


def _yaml(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False)


def version(args: argparse.Namespace, ctx: Context) -> int:
    """Determined's layout: client version, the master's version (empty when the master cannot
    be asked, with the reason on stderr), and the master's address. Exit 0 either way."""
    master = {"cluster_id": "", "master_id": "", "version": ""}
    address = ""
    try:
        address = ctx.session.master_url
        info = ctx.session.get("/master")
        master.update(cluster_id=str(info.get("cluster_id") or ""))
        master.update(version=str(info.get("version") or ""))
    except api.MasterNotFound:
        print(
            "Master not found: set DET_MASTER or use -m, or start master-lite "
            "(the client version is shown alone)",
            file=sys.stderr,
        )
    except api.APIError as e:
        first = e.message.splitlines()[0] if e.message else type(e).__name__
        print(f"Master version unknown: {first}", file=sys.stderr)
    print(
        _yaml(
            {"client": {"version": client_version()}, "master": master, "master_address": address}
        ),
        end="",
    )
    return 0


def master_info(args: argparse.Namespace, ctx: Context) -> int:
    info = ctx.session.get("/master")
    if args.json:
        _render.print_json(info)
    else:
        print(_yaml(info), end="")
    return 0


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("version", help="show version information")
    p.set_defaults(handler=version)

    parser = subparsers.add_parser("master", help="the master")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("info", help="fetch master info")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print as JSON")
    output.add_argument("--yaml", action="store_true", help="print as YAML (the default)")
    p.set_defaults(handler=master_info)
