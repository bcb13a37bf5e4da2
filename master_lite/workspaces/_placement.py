"""Where a new experiment goes: the request's project id, else its config's `workspace` and
`project` names, else Determined's default project "Uncategorized" (id 1)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from master_lite import errors
from master_lite.store import DEFAULT_PROJECT_ID, ProjectRow, Store
from master_lite.workspaces._scheduling import fill_default_pool


def project_row(store: Store, project_id: Any) -> ProjectRow:
    """The project, or NotFound naming the id and how to find one."""
    if isinstance(project_id, bool) or not isinstance(project_id, int):
        raise errors.InvalidRequest(
            f"projectId: expected a project id (integer), got {project_id!r}"
        )
    row = store.projects.get(project_id)
    if row is None:
        raise errors.NotFound(
            f"project {project_id} not found: see the projects with det project list WORKSPACE"
        )
    return row


def check_open(store: Store, project: ProjectRow) -> None:
    """InvalidRequest when the project or its workspace is archived (no new experiments)."""
    if project.archived:
        raise errors.InvalidRequest(
            f"project {project.name!r} (id {project.id}) is archived: unarchive it "
            "or choose another project"
        )
    workspace = store.workspaces.get(project.workspace_id)
    if workspace is not None and workspace.archived:
        raise errors.InvalidRequest(
            f"workspace {workspace.name!r} is archived: unarchive it "
            f"(det workspace unarchive {workspace.name!r}) or choose another workspace"
        )


def place_experiment(
    store: Store,
    config: dict,
    project_id: Any = None,
    parent_id: int | None = None,
    pools: Collection[str] | None = None,
) -> int:
    """The project a new experiment goes into (see the module's docstring; a fork without
    either goes into its parent's project); InvalidRequest naming an unknown workspace or
    project and where to look them up, or an archived one. With `pools` (the master's), a
    config that names no resource pool gets its workspace's default pool (`fill_default_pool`)."""
    project = _place(store, config, project_id, parent_id)
    if pools is not None:
        fill_default_pool(store, project, config, pools)
    return project


def _place(store: Store, config: dict, project_id: Any, parent_id: int | None) -> int:
    if project_id is None and not (config.get("workspace") or config.get("project")):
        parent = store.experiments.get(parent_id) if parent_id is not None else None
        return parent.project_id if parent is not None else DEFAULT_PROJECT_ID
    if project_id is not None:
        project = project_row(store, project_id)
    else:
        workspace_name, project_name = config.get("workspace"), config.get("project")
        workspace = store.workspaces.by_name(str(workspace_name))
        if workspace is None:
            raise errors.InvalidRequest(
                f"workspace: no workspace named {workspace_name!r} on this master; see them "
                f"with det workspace list (or create it: det workspace create {workspace_name!r})"
            )
        found = store.projects.in_workspace(workspace.id, str(project_name))
        if found is None:
            raise errors.InvalidRequest(
                f"project: workspace {workspace.name!r} has no project named {project_name!r}; "
                f"see them with det workspace list-projects {workspace.name!r} (or create it: "
                f"det project create {workspace.name!r} {project_name!r})"
            )
        project = found
    check_open(store, project)
    return project.id


__all__ = ["check_open", "place_experiment", "project_row"]
