"""The `workspaces` and `projects` tables (migration 9): how experiments are grouped.

Workspace 1 and project 1 ("Uncategorized") are Determined's defaults, made by the migration.
A project's experiments are the experiments whose `project_id` names it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from typing import Any, ClassVar

from ._repositories import TypedRepository
from ._rows import Row

DEFAULT_WORKSPACE_ID = 1
DEFAULT_PROJECT_ID = 1


@dataclasses.dataclass(frozen=True)
class WorkspaceRow(Row):
    """A row of `workspaces`."""

    TABLE: ClassVar[str] = "workspaces"
    FLAGS: ClassVar[frozenset[str]] = frozenset({"archived"})

    id: int
    name: str
    owner_id: int
    archived: bool
    created: float
    default_compute_pool: str = ""  # '' : the master's default pool (migration 11)
    resource_quota: int | None = None  # slots its experiments may hold at once (None: no limit)


@dataclasses.dataclass(frozen=True)
class ProjectRow(Row):
    """A row of `projects`."""

    TABLE: ClassVar[str] = "projects"
    FLAGS: ClassVar[frozenset[str]] = frozenset({"archived"})

    id: int
    name: str
    workspace_id: int
    owner_id: int
    archived: bool
    description: str
    key: str
    created: float


class Workspaces(TypedRepository[WorkspaceRow]):
    """The `workspaces` table."""

    row_type = WorkspaceRow

    def all(self, *, name: str | None = None, archived: bool | None = None) -> list[WorkspaceRow]:
        """Workspaces by id; `name`: exactly this name; `archived`: only (un)archived ones."""
        where: list[str] = []
        params: list[Any] = []
        if name is not None:
            where.append("name = ?")
            params.append(name)
        if archived is not None:
            where.append("archived = ?")
            params.append(int(archived))
        return self._select(" AND ".join(where), params)

    def by_name(self, name: str) -> WorkspaceRow | None:
        """The workspace with exactly this name, or None."""
        rows = self._select("name = ?", (name,))
        return rows[0] if rows else None

    def create(self, name: str, *, owner_id: int) -> int | None:
        """A new workspace's id; None when the name is taken."""
        try:
            return self._insert(name=name, owner_id=owner_id, archived=False, created=time.time())
        except sqlite3.IntegrityError:
            return None

    def rename(self, workspace_id: int, name: str) -> bool:
        """False when another workspace has the name."""
        try:
            self._update(workspace_id, name=name)
        except sqlite3.IntegrityError:
            return False
        return True

    def set_archived(self, workspace_id: int, archived: bool) -> None:
        self._update(workspace_id, archived=bool(archived))

    def set_default_pool(self, workspace_id: int, pool: str) -> None:
        """The workspace's default compute pool ('' : the master's)."""
        self._update(workspace_id, default_compute_pool=pool)

    def set_resource_quota(self, workspace_id: int, quota: int | None) -> None:
        """The workspace's slot quota (None: no limit)."""
        self._update(workspace_id, resource_quota=quota)

    def resource_quotas(self) -> dict[int, int]:
        """The slot quota of every workspace that has one, by workspace id."""
        rows = self._store.select_sql(
            "SELECT id, resource_quota FROM workspaces WHERE resource_quota IS NOT NULL"
        )
        return {row["id"]: row["resource_quota"] for row in rows}

    def of_project(self, project_id: int) -> WorkspaceRow | None:
        """The workspace the project is in (None: no such project)."""
        rows = self._select("id = (SELECT workspace_id FROM projects WHERE id = ?)", (project_id,))
        return rows[0] if rows else None

    def delete(self, workspace_id: int) -> None:
        """Remove an empty workspace (the caller checked it has no projects)."""
        self._store.execute("DELETE FROM workspaces WHERE id = ?", (workspace_id,))

    def counts(self) -> dict[int, tuple[int, int]]:
        """(number of projects, number of experiments) by workspace id."""
        rows = self._store.select_sql(
            "SELECT w.id AS id, "
            "(SELECT COUNT(*) FROM projects p WHERE p.workspace_id = w.id) AS projects, "
            "(SELECT COUNT(*) FROM experiments e JOIN projects p ON e.project_id = p.id "
            " WHERE p.workspace_id = w.id) AS experiments FROM workspaces w"
        )
        return {row["id"]: (row["projects"], row["experiments"]) for row in rows}


class Projects(TypedRepository[ProjectRow]):
    """The `projects` table, and which project each experiment is in."""

    row_type = ProjectRow

    def all(
        self,
        *,
        workspace_id: int | None = None,
        name: str | None = None,
        archived: bool | None = None,
    ) -> list[ProjectRow]:
        """Projects by id, narrowed by workspace, exact name and archived flag."""
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("workspace_id", workspace_id), ("name", name)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if archived is not None:
            where.append("archived = ?")
            params.append(int(archived))
        return self._select(" AND ".join(where), params)

    def in_workspace(self, workspace_id: int, name: str) -> ProjectRow | None:
        """The project of this name in this workspace, or None."""
        rows = self._select("workspace_id = ? AND name = ?", (workspace_id, name))
        return rows[0] if rows else None

    def key_taken(self, key: str) -> bool:
        return bool(self._store.scalar("SELECT 1 FROM projects WHERE key = ?", (key,)))

    def create(
        self, name: str, *, workspace_id: int, owner_id: int, description: str, key: str
    ) -> int | None:
        """A new project's id; None when its workspace has a project of that name (or the
        key is taken)."""
        try:
            return self._insert(
                name=name,
                workspace_id=workspace_id,
                owner_id=owner_id,
                archived=False,
                description=description,
                key=key,
                created=time.time(),
            )
        except sqlite3.IntegrityError:
            return None

    def change(self, project_id: int, **changes: Any) -> bool:
        """Write name, description or key; False when the name or key is taken."""
        try:
            self._update(project_id, **changes)
        except sqlite3.IntegrityError:
            return False
        return True

    def set_archived(self, project_id: int, archived: bool) -> None:
        self._update(project_id, archived=bool(archived))

    def delete(self, project_id: int) -> None:
        """Remove an empty project (the caller checked it has no experiments)."""
        self._store.execute("DELETE FROM projects WHERE id = ?", (project_id,))

    def counts(self) -> dict[int, tuple[int, int]]:
        """(number of experiments, number of ACTIVE ones) by project id."""
        rows = self._store.select_sql(
            "SELECT project_id AS id, COUNT(*) AS n, "
            "SUM(CASE WHEN state = 'ACTIVE' THEN 1 ELSE 0 END) AS active "
            "FROM experiments GROUP BY project_id"
        )
        return {row["id"]: (row["n"], row["active"] or 0) for row in rows}

    def experiment_ids(self, project_id: int, limit: int = 5) -> list[int]:
        """The first `limit` experiment ids in the project (what a refused delete names)."""
        rows = self._store.select_sql(
            "SELECT id FROM experiments WHERE project_id = ? ORDER BY id LIMIT ?",
            (project_id, limit),
        )
        return [row["id"] for row in rows]

    def names(self) -> dict[int, tuple[str, int, str]]:
        """(project name, workspace id, workspace name) by project id (experiment JSON)."""
        rows = self._store.select_sql(
            "SELECT p.id AS id, p.name AS name, w.id AS wid, w.name AS wname "
            "FROM projects p JOIN workspaces w ON p.workspace_id = w.id"
        )
        return {row["id"]: (row["name"], row["wid"], row["wname"]) for row in rows}

    def place(self, project_id: int) -> dict[int, tuple[str, int, str]]:
        """`names()` for one project only (one experiment's JSON, built at every event)."""
        rows = self._store.select_sql(
            "SELECT p.id AS id, p.name AS name, w.id AS wid, w.name AS wname "
            "FROM projects p JOIN workspaces w ON p.workspace_id = w.id WHERE p.id = ?",
            (project_id,),
        )
        return {row["id"]: (row["name"], row["wid"], row["wname"]) for row in rows}

    def move_experiment(self, experiment_id: int, project_id: int) -> None:
        """The experiment is now in `project_id` (Determined's MoveExperiment)."""
        self._store.execute(
            "UPDATE experiments SET project_id = ? WHERE id = ?", (project_id, experiment_id)
        )


__all__ = [
    "DEFAULT_PROJECT_ID",
    "DEFAULT_WORKSPACE_ID",
    "ProjectRow",
    "Projects",
    "WorkspaceRow",
    "Workspaces",
]
