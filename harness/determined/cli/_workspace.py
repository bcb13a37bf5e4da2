"""`det workspace` (alias `w`) and `det project` (alias `p`): Determined's workspaces and
projects, with its arguments and output columns (docs/team.md, "Workspaces and projects").

Workspaces and projects are named on the command line (`det project create WORKSPACE NAME`);
the master is asked for their ids. Deleting asks for confirmation on a terminal (`--yes` skips
it); the master refuses a workspace with projects, or a project with experiments, naming them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from determined.cli import _render
from determined.cli._base import CliError, Context
from determined.cli._workspace_scheduling import add_quota_parser, pool_arguments

WORKSPACE_HEADERS = [
    "ID",
    "Name",
    "# Projects",
    "Agent Uid",
    "Agent Gid",
    "Agent User",
    "Agent Group",
    "Default Compute Pool",
    "Default Aux Pool",
    "Resource Quota",  # our addition: the most slots its experiments may hold at once
]
PROJECT_HEADERS = ["ID", "Key", "Name", "Description", "# Experiments", "# Active Experiments"]
EXPERIMENT_HEADERS = [
    "ID",
    "Owner",
    "Name",
    "Parent ID",
    "State",
    "Progress",
    "Started",
    "Ended",
    "Resource Pool",
]


# -- lookups ------------------------------------------------------------------------------------
def workspace_by_name(ctx: Context, name: str) -> dict:
    """The workspace named `name`; CliError naming it and `det workspace list` otherwise."""
    found = ctx.session.get("/workspaces", {"name": name})["workspaces"]
    if not found:
        raise CliError(f"workspace {name!r} not found: see the workspaces with det workspace list")
    return dict(found[0])


def project_by_name(ctx: Context, workspace_name: str, project_name: str) -> tuple[dict, dict]:
    """(workspace, project) by their names; CliError naming what is missing."""
    workspace = workspace_by_name(ctx, workspace_name)
    found = ctx.session.get(f"/workspaces/{workspace['id']}/projects", {"name": project_name})[
        "projects"
    ]
    if not found:
        raise CliError(
            f"project {project_name!r} not found in workspace {workspace_name!r}: see its "
            f"projects with det workspace list-projects {workspace_name!r}"
        )
    return workspace, dict(found[0])


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        raise CliError("deleting asks for confirmation, but there is no terminal: pass --yes")
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


# -- rendering ----------------------------------------------------------------------------------
def _workspace_row(w: dict) -> list[Any]:
    return [
        w["id"],
        w["name"],
        w.get("numProjects"),
        None,
        None,
        None,
        None,
        w.get("defaultComputePool"),
        w.get("defaultAuxPool"),
        w.get("resourceQuota"),
    ]


def _print_workspaces(workspaces: list[dict], *, with_storage: bool) -> None:
    headers = WORKSPACE_HEADERS + (["Checkpoint Storage Config"] if with_storage else [])
    rows = [_workspace_row(w) + ([None] if with_storage else []) for w in workspaces]
    _render.print_table(headers, rows, as_csv=False)


def _project_row(p: dict) -> list[Any]:
    return [
        p["id"],
        p.get("key"),
        p["name"],
        p.get("description"),
        p.get("numExperiments"),
        p.get("numActiveExperiments"),
    ]


def _sorted_page(items: list[dict], args: argparse.Namespace) -> list[dict]:
    items = sorted(items, key=lambda item: item[args.sort_by], reverse=args.order_by == "desc")
    offset = args.offset or 0
    return items[offset : offset + args.limit]


def print_experiments(experiments: list[dict], *, show_archived: bool, as_csv: bool) -> None:
    """Determined's experiment table (`det project list-experiments`, `det e list`)."""
    headers = EXPERIMENT_HEADERS + (["Archived"] if show_archived else [])
    rows = []
    for e in experiments:
        row = [
            e["id"],
            e.get("username"),
            e.get("name"),
            e.get("parent_id"),
            _render.shown_state(e),
            _render.format_progress(e.get("progress")),
            _render.format_time(e.get("start_time")),
            _render.format_time(e.get("end_time")),
            e.get("resourcePool") or "default",
        ]
        if show_archived:
            row.append(e.get("archived"))
        rows.append(row)
    _render.print_table(headers, rows, as_csv=as_csv)


# -- det workspace ------------------------------------------------------------------------------
def list_workspaces(args: argparse.Namespace, ctx: Context) -> int:
    workspaces = _sorted_page(ctx.session.get("/workspaces")["workspaces"], args)
    if args.json:
        _render.print_json(workspaces)
    else:
        _print_workspaces(workspaces, with_storage=False)
    return 0


def list_workspace_projects(args: argparse.Namespace, ctx: Context) -> int:
    workspace = workspace_by_name(ctx, args.workspace_name)
    projects = ctx.session.get(f"/workspaces/{workspace['id']}/projects")["projects"]
    projects = _sorted_page(projects, args)
    if args.json:
        _render.print_json(projects)
    else:
        _render.print_table(PROJECT_HEADERS, [_project_row(p) for p in projects], as_csv=False)
    return 0


def create_workspace(args: argparse.Namespace, ctx: Context) -> int:
    body: dict[str, Any] = {"name": args.name}
    if args.default_compute_pool is not None:
        body["defaultComputePool"] = args.default_compute_pool
    if args.resource_quota is not None:
        body["clusterQuotaPairs"] = {args.cluster_name or "": args.resource_quota}
    workspace = ctx.session.post("/workspaces", body)["workspace"]
    if args.json:
        _render.print_json(workspace)
    else:
        _print_workspaces([workspace], with_storage=True)
    return 0


def describe_workspace(args: argparse.Namespace, ctx: Context) -> int:
    workspace = workspace_by_name(ctx, args.workspace_name)
    if args.json:
        _render.print_json(workspace)
    else:
        _print_workspaces([workspace], with_storage=True)
    return 0


def edit_workspace(args: argparse.Namespace, ctx: Context) -> int:
    workspace = workspace_by_name(ctx, args.workspace_name)
    patch: dict[str, Any] = {"name": args.name} if args.name else {}
    if args.default_compute_pool is not None:
        patch["defaultComputeResourcePool"] = args.default_compute_pool
    workspace = ctx.session.patch(f"/workspaces/{workspace['id']}", patch)["workspace"]
    if args.json:
        _render.print_json(workspace)
    else:
        _print_workspaces([workspace], with_storage=True)
    return 0


def _delete(ctx: Context, yes: bool, kind: str, name: str, path: str, holds: str) -> int:
    """Delete the workspace or project at `path` once confirmed (Determined's wording)."""
    if yes or _confirm(
        f'Deleting {kind} "{name}" cannot be undone (the master refuses while it has '
        f"{holds}). Do you still wish to proceed?"
    ):
        ctx.session.delete(path)
        print(f"Successfully deleted {kind} {name}.")
    else:
        print(f"Aborting {kind} deletion.")
    return 0


def _archive(ctx: Context, action: str, kind: str, name: str, path: str) -> int:
    """POST `<path>/archive` or `/unarchive` and say so, as Determined does."""
    ctx.session.post(f"{path}/{action}")
    done = "archived" if action == "archive" else "un-archived"
    print(f"Successfully {done} {kind} {name}.")
    return 0


def delete_workspace(args: argparse.Namespace, ctx: Context) -> int:
    workspace = workspace_by_name(ctx, args.workspace_name)
    path = f"/workspaces/{workspace['id']}"
    return _delete(ctx, args.yes, "workspace", args.workspace_name, path, "projects")


def _archive_workspace(args: argparse.Namespace, ctx: Context, action: str) -> int:
    workspace = workspace_by_name(ctx, args.workspace_name)
    path = f"/workspaces/{workspace['id']}"
    return _archive(ctx, action, "workspace", args.workspace_name, path)


# -- det project --------------------------------------------------------------------------------
def _project_experiments(ctx: Context, project: dict, args: argparse.Namespace) -> list[dict]:
    """The project's experiments: the caller's unarchived ones, every one with --all."""
    params: dict[str, Any] = {"projectId": project["id"]}
    if not args.all:
        params["archived"] = "false"
        params["users"] = ctx.session.get("/me")["user"]["username"]
    experiments = ctx.session.get("/experiments", params)["experiments"]
    key = getattr(args, "sort_by", "id")
    return sorted(experiments, key=lambda e: e[key], reverse=args.order_by == "desc")


def list_project_experiments(args: argparse.Namespace, ctx: Context) -> int:
    _, project = project_by_name(ctx, args.workspace_name, args.project_name)
    experiments = _project_experiments(ctx, project, args)
    offset = args.offset or 0
    experiments = experiments[offset : offset + args.limit]
    if args.json:
        _render.print_json(experiments)
    else:
        print_experiments(experiments, show_archived=args.all, as_csv=False)
    return 0


def create_project(args: argparse.Namespace, ctx: Context) -> int:
    workspace = workspace_by_name(ctx, args.workspace_name)
    body: dict[str, Any] = {"name": args.name, "workspaceId": workspace["id"]}
    if args.description is not None:
        body["description"] = args.description
    if args.key is not None:
        body["key"] = args.key
    project = ctx.session.post(f"/workspaces/{workspace['id']}/projects", body)["project"]
    if args.json:
        _render.print_json(project)
    else:
        _render.print_table(PROJECT_HEADERS, [_project_row(project)], as_csv=False)
    return 0


def describe_project(args: argparse.Namespace, ctx: Context) -> int:
    _, project = project_by_name(ctx, args.workspace_name, args.project_name)
    if args.json:
        _render.print_json(project)
        return 0
    _render.print_table(PROJECT_HEADERS, [_project_row(project)], as_csv=False)
    print("\nAssociated Experiments")
    args.order_by, args.sort_by = "asc", "id"
    experiments = _project_experiments(ctx, project, args)
    print_experiments(experiments, show_archived=args.all, as_csv=False)
    return 0


def edit_project(args: argparse.Namespace, ctx: Context) -> int:
    _, project = project_by_name(ctx, args.workspace_name, args.project_name)
    patch = {
        field: value
        for field, value in (
            ("name", args.new_name),
            ("description", args.description),
            ("key", args.key),
        )
        if value is not None
    }
    project = ctx.session.patch(f"/projects/{project['id']}", patch)["project"]
    if args.json:
        _render.print_json(project)
    else:
        _render.print_table(PROJECT_HEADERS, [_project_row(project)], as_csv=False)
    return 0


def delete_project(args: argparse.Namespace, ctx: Context) -> int:
    _, project = project_by_name(ctx, args.workspace_name, args.project_name)
    path = f"/projects/{project['id']}"
    return _delete(ctx, args.yes, "project", args.project_name, path, "experiments")


def _archive_project(args: argparse.Namespace, ctx: Context, action: str) -> int:
    _, project = project_by_name(ctx, args.workspace_name, args.project_name)
    return _archive(ctx, action, "project", args.project_name, f"/projects/{project['id']}")


def move_experiment(args: argparse.Namespace, ctx: Context) -> int:
    """`det e move ID WORKSPACE PROJECT`."""
    _, project = project_by_name(ctx, args.workspace_name, args.project_name)
    body = {"destinationProjectId": project["id"], "experimentId": args.experiment_id}
    ctx.session.post(f"/experiments/{args.experiment_id}/move", body)
    print(f'Moved experiment {args.experiment_id} to project "{args.project_name}"')
    return 0


# -- parsers ------------------------------------------------------------------------------------
def _listing_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sort-by", choices=["id", "name"], default="id", help="sort by")
    parser.add_argument("--order-by", choices=["asc", "desc"], default="asc", help="order")
    parser.add_argument("--limit", type=int, default=200, help="maximum items per page")
    parser.add_argument("--offset", type=int, default=None, help="items to skip first")
    parser.add_argument("--json", action="store_true", help="print as JSON")


def _names(parser: argparse.ArgumentParser, *, project: bool = True) -> None:
    parser.add_argument("workspace_name", help="name of the workspace")
    if project:
        parser.add_argument("project_name", help="name of the project")


def _yes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", action="store_true", help="automatically answer yes to prompts")


def add_parser(subparsers: Any) -> None:
    w = subparsers.add_parser("workspace", aliases=["w"], help="manage workspaces")
    verbs = w.add_subparsers(dest="verb", metavar="VERB")
    w.set_defaults(handler=list_workspaces, sort_by="id", order_by="asc", limit=200)
    w.set_defaults(offset=None, json=False)
    p = verbs.add_parser("list", aliases=["ls"], help="list all workspaces")
    _listing_arguments(p)
    p.set_defaults(handler=list_workspaces)
    p = verbs.add_parser("list-projects", help="list the projects of a workspace")
    _names(p, project=False)
    _listing_arguments(p)
    p.set_defaults(handler=list_workspace_projects)
    p = verbs.add_parser("create", help="create workspace")
    p.add_argument("name", help="unique name of the workspace")
    pool_arguments(p)
    p.add_argument(
        "--resource-quota",
        type=int,
        help="the most slots the workspace's experiments may hold at once (admins only)",
    )
    p.add_argument("--cluster-name", help="accepted for Determined's scripts: one cluster here")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=create_workspace)
    p = verbs.add_parser("delete", help="delete workspace")
    _names(p, project=False)
    _yes(p)
    p.set_defaults(handler=delete_workspace)
    p = verbs.add_parser("describe", help="describe workspace")
    _names(p, project=False)
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=describe_workspace)
    p = verbs.add_parser("edit", help="edit workspace")
    p.add_argument("workspace_name", help="current name of the workspace")
    p.add_argument("--name", help="new name of the workspace")
    pool_arguments(p)
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=edit_workspace)
    add_quota_parser(verbs)
    for action in ("archive", "unarchive"):
        p = verbs.add_parser(action, help=f"{action} workspace")
        _names(p, project=False)
        p.set_defaults(handler=lambda a, c, action=action: _archive_workspace(a, c, action))

    pr = subparsers.add_parser("project", aliases=["p"], help="manage projects")
    verbs = pr.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("list", aliases=["ls"], help="list the projects of a workspace")
    _names(p, project=False)
    _listing_arguments(p)
    p.set_defaults(handler=list_workspace_projects)
    p = verbs.add_parser("list-experiments", help="list the experiments of a project")
    _names(p)
    p.add_argument(
        "--all",
        "-a",
        action="store_true",
        help="show all experiments (including archived and other users')",
    )
    _listing_arguments(p)
    p.set_defaults(handler=list_project_experiments)
    p = verbs.add_parser("create", help="create project")
    _names(p, project=False)
    p.add_argument("name", help="name of the project")
    p.add_argument("--description", help="description of the project")
    p.add_argument("--key", help="key of the project")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=create_project)
    p = verbs.add_parser("delete", help="delete project")
    _names(p)
    _yes(p)
    p.set_defaults(handler=delete_project)
    for action in ("archive", "unarchive"):
        p = verbs.add_parser(action, help=f"{action} project")
        _names(p)
        p.set_defaults(handler=lambda a, c, action=action: _archive_project(a, c, action))
    p = verbs.add_parser("describe", help="describe project")
    _names(p)
    p.add_argument(
        "--all",
        "-a",
        action="store_true",
        help="show all experiments (including archived and other users')",
    )
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=describe_project)
    p = verbs.add_parser("edit", help="edit project")
    _names(p)
    p.add_argument("--new_name", "--new-name", dest="new_name", help="new name of the project")
    p.add_argument("--description", help="new description of the project")
    p.add_argument("--key", help="new key of the project")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=edit_project)


__all__ = ["add_parser", "move_experiment", "print_experiments", "project_by_name"]
