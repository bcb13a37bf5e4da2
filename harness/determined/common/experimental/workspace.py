"""`Workspace`: a group of projects (docs/team.md, "Workspaces and projects"), and the
`Determined` methods that make and find them, as Determined's SDK has them."""

from __future__ import annotations

from typing import Any

from determined.common import api
from determined.common.experimental.project import Project


def workspace_answer(session: api.Session, name: str) -> dict[str, Any]:
    """The workspace named `name` as the master answers it; NotFoundException otherwise."""
    found = session.get("/workspaces", {"name": name})["workspaces"]
    if not found:
        raise api.errors.NotFoundException(
            f"workspace {name!r} not found: see the workspaces with det workspace list"
        )
    return dict(found[0])


class Workspace:
    """A workspace: `id`, `name`, `archived`, `username` (its owner). Made with an id or a
    name (not both), as Determined's."""

    def __init__(
        self,
        session: api.Session,
        workspace_id: int | None = None,
        workspace_name: str | None = None,
    ) -> None:
        """A workspace by id or by name (its id is asked for).

        Raises:
            ValueError: both or neither of `workspace_id` and `workspace_name` were given.
            determined.common.api.errors.NotFoundException: no workspace has the name.
        """
        if (workspace_id is None) == (workspace_name is None):
            raise ValueError("Workspace must be constructed with either a name or id (not both).")
        self._session = session
        self.name = workspace_name
        self.archived: bool | None = None
        self.username: str | None = None
        if workspace_id is None:
            assert workspace_name is not None
            self._hydrate(workspace_answer(session, workspace_name))
        else:
            self.id = int(workspace_id)

    def _hydrate(self, answer: dict[str, Any]) -> None:
        self.id = int(answer["id"])
        self.name = answer.get("name")
        self.archived = bool(answer.get("archived"))
        self.username = answer.get("username")

    @classmethod
    def _from_json(cls, answer: dict[str, Any], session: api.Session) -> Workspace:
        made = cls(session, workspace_id=int(answer["id"]))
        made._hydrate(answer)
        return made

    def reload(self) -> None:
        """Read the workspace's attributes from the master again."""
        self._hydrate(self._session.get(f"/workspaces/{self.id}")["workspace"])

    def create_project(self, name: str, description: str | None = None) -> Project:
        """A new project in this workspace, owned by the signed-in user.

        Raises:
            determined.common.api.errors.APIException: the workspace has a project of that
                name (409), or is archived (400).
        """
        body: dict[str, Any] = {"name": name, "workspaceId": self.id}
        if description is not None:
            body["description"] = description
        answer = self._session.post(f"/workspaces/{self.id}/projects", body)["project"]
        return Project._from_json(answer, self._session)

    def get_project(self, project_name: str) -> Project:
        """The project of this name in this workspace (NotFoundException when none)."""
        found = self._session.get(f"/workspaces/{self.id}/projects", {"name": project_name})[
            "projects"
        ]
        if not found:
            raise api.errors.NotFoundException(
                f"project {project_name!r} not found in workspace {self.name!r}"
            )
        return Project._from_json(found[0], self._session)

    def list_projects(self) -> list[Project]:
        """Every project of this workspace, by id."""
        answers = self._session.get(f"/workspaces/{self.id}/projects")["projects"]
        return [Project._from_json(p, self._session) for p in answers]

    def delete_project(self, name: str) -> None:
        """Delete the (empty) project of this name: the master refuses one with experiments."""
        self._session.delete(f"/projects/{self.get_project(name).id}")


class WorkspaceMethods:
    """`Determined`'s workspace methods (a base of `Determined`, which has `_session`)."""

    _session: api.Session

    def create_workspace(self, name: str) -> Workspace:
        """A new workspace, owned by the signed-in user (APIException 409: the name is taken)."""
        answer = self._session.post("/workspaces", {"name": name})["workspace"]
        return Workspace._from_json(answer, self._session)

    def get_workspace(self, name: str) -> Workspace:
        """The workspace of this name (NotFoundException when none)."""
        return Workspace._from_json(workspace_answer(self._session, name), self._session)

    def list_workspaces(self) -> list[Workspace]:
        """Every workspace, by id."""
        answers = self._session.get("/workspaces")["workspaces"]
        return [Workspace._from_json(w, self._session) for w in answers]

    def delete_workspace(self, name: str) -> None:
        """Delete the (empty) workspace of this name: the master refuses one with projects."""
        self._session.delete(f"/workspaces/{self.get_workspace(name).id}")


__all__ = ["Workspace", "WorkspaceMethods", "workspace_answer"]
