"""Determined's Workspace and Project objects as this master fills them."""

from __future__ import annotations

from master_lite._core._serialize import iso
from master_lite.store import DEFAULT_PROJECT_ID, DEFAULT_WORKSPACE_ID, ProjectRow, WorkspaceRow


def workspace_json(
    row: WorkspaceRow, *, username: str | None, num_projects: int, num_experiments: int
) -> dict:
    """Determined's v1Workspace (no agent user group or storage here: null), with its default
    compute pool (null: the master's default) and our `resourceQuota` (its slot quota; null:
    no limit)."""
    return {
        "id": row.id,
        "name": row.name,
        "archived": row.archived,
        "username": username,
        "userId": row.owner_id,
        # Determined's default workspace cannot be renamed, archived or deleted.
        "immutable": row.id == DEFAULT_WORKSPACE_ID,
        "numProjects": num_projects,
        "numExperiments": num_experiments,
        "pinned": False,
        "state": "WORKSPACE_STATE_UNSPECIFIED",
        "errorMessage": "",
        "agentUserGroup": None,
        "checkpointStorageConfig": None,
        "defaultComputePool": row.default_compute_pool or None,
        "defaultAuxPool": None,
        "resourceQuota": row.resource_quota,
    }


def project_json(
    row: ProjectRow,
    *,
    username: str | None,
    workspace_name: str | None,
    num_experiments: int,
    num_active_experiments: int,
) -> dict:
    """Determined's v1Project."""
    return {
        "id": row.id,
        "name": row.name,
        "key": row.key,
        "description": row.description,
        "workspaceId": row.workspace_id,
        "workspaceName": workspace_name,
        "archived": row.archived,
        "username": username,
        "userId": row.owner_id,
        "immutable": row.id == DEFAULT_PROJECT_ID,
        "numExperiments": num_experiments,
        "numActiveExperiments": num_active_experiments,
        "numRuns": 0,
        "notes": [],
        "state": "WORKSPACE_STATE_UNSPECIFIED",
        "errorMessage": "",
        "lastExperimentStartedAt": None,
        "createdAt": iso(row.created),
    }


__all__ = ["project_json", "workspace_json"]
