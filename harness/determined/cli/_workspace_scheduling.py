"""`det workspace resource-quota set|unset` and the workspace's default pool arguments
(docs/scheduling.md, "Workspace quotas and default pools"): Determined's verbs and arguments;
`unset` is our addition. The quota is the most slots the workspace's experiments may hold at
once; only admins set it (the master answers 403 otherwise)."""

from __future__ import annotations

import argparse
from typing import Any

from determined.cli._base import CliError, Context


def _workspace(ctx: Context, name: str) -> dict:
    found = ctx.session.get("/workspaces", {"name": name})["workspaces"]
    if not found:
        raise CliError(f"workspace {name!r} not found: see the workspaces with det workspace list")
    return dict(found[0])


def set_resource_quota(args: argparse.Namespace, ctx: Context) -> int:
    """`det workspace resource-quota set NAME N` (Determined's; admins only)."""
    workspace = _workspace(ctx, args.workspace_name)
    pairs = {args.cluster_name or "": args.resource_quota}
    body = {"id": workspace["id"], "clusterQuotaPairs": pairs}
    ctx.session.post(f"/workspaces/{workspace['id']}/set-resource-quota", body)
    where = f" for cluster {args.cluster_name}" if args.cluster_name else ""
    print(f"Resource quota {args.resource_quota} is set on workspace {args.workspace_name}{where}")
    return 0


def unset_resource_quota(args: argparse.Namespace, ctx: Context) -> int:
    """`det workspace resource-quota unset NAME` (our addition; admins only): no limit."""
    workspace = _workspace(ctx, args.workspace_name)
    body = {"id": workspace["id"], "clusterQuotaPairs": {"": None}}
    ctx.session.post(f"/workspaces/{workspace['id']}/set-resource-quota", body)
    print(f"Resource quota removed from workspace {args.workspace_name}")
    return 0


def pool_arguments(parser: argparse.ArgumentParser) -> None:
    """Determined's --default-compute-pool / --default-aux-pool ('' : the master's default)."""
    parser.add_argument(
        "--default-compute-pool",
        help="name of the pool to set as the default compute pool ('' for the master's)",
    )
    parser.add_argument(
        "--default-aux-pool",
        help="accepted for Determined's scripts; this master has no auxiliary pools",
    )


def add_quota_parser(verbs: Any) -> None:
    """`det workspace resource-quota ...` under `det workspace`'s verbs."""
    quota = verbs.add_parser("resource-quota", help="manage resource quotas")
    quota_verbs = quota.add_subparsers(dest="quota_verb", metavar="VERB", required=True)
    p = quota_verbs.add_parser("set", help="set resource quota")
    p.add_argument("workspace_name", help="name of the workspace")
    p.add_argument(
        "resource_quota",
        type=int,
        help="the most slots the workspace's experiments may hold at once",
    )
    p.add_argument("--cluster-name", help="accepted for Determined's scripts: one cluster here")
    p.set_defaults(handler=set_resource_quota)
    p = quota_verbs.add_parser("unset", help="remove the resource quota (no limit)")
    p.add_argument("workspace_name", help="name of the workspace")
    p.set_defaults(handler=unset_resource_quota)


__all__ = ["add_quota_parser", "pool_arguments"]
