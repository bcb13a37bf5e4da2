"""The workspaces part: Determined's workspaces and projects, and moving experiments between
projects (docs/team.md, "Workspaces and projects").

Anyone signed in may read them and create them (the creator owns what it creates); renaming,
archiving and deleting one needs its owner or an admin (the route table's `Operation.owner`,
checked by the users part before these methods run). The default workspace and project
("Uncategorized", id 1) hold every experiment not placed elsewhere; they cannot be renamed,
archived or deleted. A workspace with projects, or a project with experiments, is not deleted:
the 409 names what is in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from master_lite import errors
from master_lite._core import MasterState
from master_lite.scheduler import Scheduler
from master_lite.store import DEFAULT_PROJECT_ID, DEFAULT_WORKSPACE_ID, ProjectRow, WorkspaceRow

from ._json import project_json, workspace_json
from ._names import check_description, check_key, check_name, new_key
from ._placement import check_open, project_row
from ._scheduling import check_pool, check_quota_pairs


class Workspaces:
    """Workspaces, their projects, and where experiments are."""

    def __init__(
        self,
        shared: MasterState,
        *,
        publish_experiment: Callable[[int], None] | None = None,
        scheduler: Scheduler | None = None,
        wake_scheduler: Callable[[], None] | None = None,
    ) -> None:
        self._shared = shared
        # The views' experiment event, so that open lists see a moved experiment.
        self._publish = publish_experiment or (lambda experiment_id: None)
        # Workspace quotas and default pools (docs/scheduling.md): the scheduler that applies
        # the quotas, and a pass of it once they change (a raised quota starts waiting trials).
        self._scheduler = scheduler
        self._wake = wake_scheduler or (lambda: None)

    @property
    def _pools(self) -> list[str]:
        return list(self._scheduler.pools) if self._scheduler is not None else []

    @property
    def _store(self) -> Any:
        return self._shared.store

    # -- rows ---------------------------------------------------------------------------------
    def _workspace(self, workspace_id: int) -> WorkspaceRow:
        row = self._store.workspaces.get(int(workspace_id))
        if row is None:
            raise errors.NotFound(
                f"workspace {workspace_id} not found: see the workspaces with det workspace list"
            )
        return row

    def _project(self, project_id: int) -> ProjectRow:
        return project_row(self._store, int(project_id))

    @staticmethod
    def _check_mutable(kind: str, row: Any, verb: str) -> None:
        if row.id == (DEFAULT_WORKSPACE_ID if kind == "workspace" else DEFAULT_PROJECT_ID):
            raise errors.InvalidRequest(
                f"{kind} {row.id} {row.name!r} is the default {kind}: it cannot be {verb}"
            )

    # -- JSON ---------------------------------------------------------------------------------
    def _workspaces_json(self, rows: list[WorkspaceRow]) -> list[dict]:
        names = self._store.users.names()
        counts = self._store.workspaces.counts()
        return [
            workspace_json(
                row,
                username=names.get(row.owner_id),
                num_projects=counts.get(row.id, (0, 0))[0],
                num_experiments=counts.get(row.id, (0, 0))[1],
            )
            for row in rows
        ]

    def _projects_json(self, rows: list[ProjectRow]) -> list[dict]:
        names = self._store.users.names()
        counts = self._store.projects.counts()
        workspaces = {row.id: row.name for row in self._store.workspaces.all()}
        return [
            project_json(
                row,
                username=names.get(row.owner_id),
                workspace_name=workspaces.get(row.workspace_id),
                num_experiments=counts.get(row.id, (0, 0))[0],
                num_active_experiments=counts.get(row.id, (0, 0))[1],
            )
            for row in rows
        ]

    # -- workspaces ---------------------------------------------------------------------------
    def list_workspaces(
        self, *, name: str | None = None, archived: bool | None = None
    ) -> list[dict]:
        """Workspaces by id; `name`: exactly this name."""
        return self._workspaces_json(self._store.workspaces.all(name=name, archived=archived))

    def get_workspace(self, workspace_id: int) -> dict:
        return {"workspace": self._workspaces_json([self._workspace(workspace_id)])[0]}

    def create_workspace(
        self,
        name: Any,
        *,
        owner_id: int,
        default_compute_pool: Any = None,
        cluster_quota_pairs: Any = None,
    ) -> dict:
        """A new workspace owned by `owner_id`, with Determined's `defaultComputePool` and
        `clusterQuotaPairs` (the caller checked that only an admin gives a quota); Conflict
        when the name is taken."""
        name = check_name(name, "workspace")
        pool = check_pool(default_compute_pool, self._pools, "defaultComputePool")
        has_quota, quota = check_quota_pairs(cluster_quota_pairs)
        new_id = self._store.workspaces.create(name, owner_id=owner_id)
        if new_id is None:
            raise errors.Conflict(f"workspace {name!r} already exists: choose another name")
        if pool:
            self._store.workspaces.set_default_pool(new_id, pool)
        if has_quota:
            self._store.workspaces.set_resource_quota(new_id, quota)
            self.apply_quotas()
        return self.get_workspace(new_id)

    def patch_workspace(self, workspace_id: int, patch: dict) -> dict:
        """Rename, and change the default compute pool (Determined's PatchWorkspace `name` and
        `defaultComputeResourcePool`, '' for the master's default; its aux pool, agent user
        group and storage do not apply here)."""
        row = self._workspace(workspace_id)
        # null: unchanged, as in Determined (its CLI sends null for a flag not given).
        if patch.get("defaultComputeResourcePool") is not None:
            pool = check_pool(
                patch["defaultComputeResourcePool"], self._pools, "defaultComputeResourcePool"
            )
            self._store.workspaces.set_default_pool(row.id, pool)
        if patch.get("name") is not None and patch["name"] != row.name:
            self._check_mutable("workspace", row, "renamed")
            name = check_name(patch["name"], "workspace")
            if not self._store.workspaces.rename(row.id, name):
                raise errors.Conflict(f"workspace {name!r} already exists: choose another name")
        return self.get_workspace(row.id)

    def set_resource_quota(self, workspace_id: int, cluster_quota_pairs: Any) -> dict:
        """Determined's SetResourceQuotas (admins only, checked by the route): the workspace's
        slot quota, `{"": N}`; `{"": null}` removes it (our addition). Waiting trials that a
        raised quota lets start, start; running ones above a lowered quota keep their slots."""
        row = self._workspace(workspace_id)
        has_quota, quota = check_quota_pairs(cluster_quota_pairs)
        if not has_quota:
            raise errors.InvalidRequest(
                'clusterQuotaPairs: give the quota, e.g. {"": 4} (null removes it)'
            )
        self._store.workspaces.set_resource_quota(row.id, quota)
        self.apply_quotas()
        return {}

    def resource_quotas(self, workspace_id: int) -> dict:
        """Determined's GetKubernetesResourceQuotas: `{"resourceQuotas": {"": N}}`, empty
        without a quota."""
        row = self._workspace(workspace_id)
        quotas = {} if row.resource_quota is None else {"": float(row.resource_quota)}
        return {"resourceQuotas": quotas}

    def apply_quotas(self, *, wake: bool = True) -> None:
        """Give the scheduler the stored workspace quotas (at start, without a pass; and after
        a change, with one)."""
        if self._scheduler is None or self._shared.store is None:
            return
        self._scheduler.set_workspace_quotas(self._store.workspaces.resource_quotas())
        if wake:
            self._wake()

    def archive_workspace(self, workspace_id: int, archived: bool) -> dict:
        row = self._workspace(workspace_id)
        self._check_mutable("workspace", row, "archived" if archived else "unarchived")
        self._store.workspaces.set_archived(row.id, archived)
        return {}

    def delete_workspace(self, workspace_id: int) -> dict:
        """Delete an empty workspace; Conflict naming its projects otherwise (delete or move
        them first)."""
        row = self._workspace(workspace_id)
        self._check_mutable("workspace", row, "deleted")
        projects = self._store.projects.all(workspace_id=row.id)
        if projects:
            listed = ", ".join(repr(p.name) for p in projects[:5])
            more = f" and {len(projects) - 5} more" if len(projects) > 5 else ""
            raise errors.Conflict(
                f"workspace {row.name!r} is not empty: it has {len(projects)} project(s) "
                f"({listed}{more}); delete them first (det project delete {row.name!r} NAME)"
            )
        self._store.workspaces.delete(row.id)
        return {"completed": True}

    # -- projects -----------------------------------------------------------------------------
    def list_projects(
        self, workspace_id: int, *, name: str | None = None, archived: bool | None = None
    ) -> list[dict]:
        row = self._workspace(workspace_id)
        rows = self._store.projects.all(workspace_id=row.id, name=name, archived=archived)
        return self._projects_json(rows)

    def get_project(self, project_id: int) -> dict:
        return {"project": self._projects_json([self._project(project_id)])[0]}

    def create_project(
        self,
        workspace_id: int,
        name: Any,
        *,
        owner_id: int,
        description: Any = None,
        key: Any = None,
    ) -> dict:
        """A new project in the workspace; Conflict when the workspace has one of that name."""
        workspace = self._workspace(workspace_id)
        if workspace.archived:
            raise errors.InvalidRequest(
                f"workspace {workspace.name!r} is archived: unarchive it before adding projects"
            )
        name = check_name(name, "project")
        if key is not None:
            key = check_key(key)
            if self._store.projects.key_taken(key):
                raise errors.Conflict(f"project key {key!r} is taken: choose another key")
        else:
            key = new_key(name, self._store.projects.key_taken)
        new_id = self._store.projects.create(
            name,
            workspace_id=workspace.id,
            owner_id=owner_id,
            description=check_description(description),
            key=key,
        )
        if new_id is None:
            raise errors.Conflict(
                f"workspace {workspace.name!r} already has a project named {name!r}: "
                "choose another name"
            )
        return self.get_project(new_id)

    def patch_project(self, project_id: int, patch: dict) -> dict:
        """Change `name`, `description`, `key`."""
        row = self._project(project_id)
        changes: dict[str, Any] = {}
        if patch.get("name") is not None and patch["name"] != row.name:
            self._check_mutable("project", row, "renamed")
            changes["name"] = check_name(patch["name"], "project")
        if patch.get("description") is not None:
            changes["description"] = check_description(patch["description"])
        if patch.get("key") is not None:
            changes["key"] = check_key(patch["key"])
        if changes and not self._store.projects.change(row.id, **changes):
            raise errors.Conflict(
                "project name or key taken: another project of the workspace has the name "
                f"{changes.get('name', row.name)!r}, or another project the key "
                f"{changes.get('key', row.key)!r}"
            )
        return self.get_project(row.id)

    def archive_project(self, project_id: int, archived: bool) -> dict:
        row = self._project(project_id)
        self._check_mutable("project", row, "archived" if archived else "unarchived")
        self._store.projects.set_archived(row.id, archived)
        return {}

    def delete_project(self, project_id: int) -> dict:
        """Delete an empty project; Conflict naming its experiments otherwise."""
        row = self._project(project_id)
        self._check_mutable("project", row, "deleted")
        count = self._store.projects.counts().get(row.id, (0, 0))[0]
        if count:
            ids = ", ".join(str(i) for i in self._store.projects.experiment_ids(row.id))
            more = " ..." if count > 5 else ""
            raise errors.Conflict(
                f"project {row.name!r} is not empty: it has {count} experiment(s) "
                f"({ids}{more}); move them (det e move ID WORKSPACE PROJECT) or delete them first"
            )
        self._store.projects.delete(row.id)
        return {"completed": True}

    # -- experiments --------------------------------------------------------------------------
    def move_experiment(self, experiment_id: int, destination_project_id: Any) -> dict:
        """Move the experiment into another project (Determined's MoveExperiment)."""
        if self._store.experiments.get(int(experiment_id)) is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        project = project_row(self._store, destination_project_id)
        check_open(self._store, project)
        self._store.projects.move_experiment(int(experiment_id), project.id)
        if self._scheduler is not None:  # its trials count against the new workspace's quota
            workspace = self._workspace(project.workspace_id)
            self._scheduler.move_experiment(int(experiment_id), workspace.id, workspace.name)
            self._wake()
        self._publish(int(experiment_id))
        return {}


__all__ = ["Workspaces"]
