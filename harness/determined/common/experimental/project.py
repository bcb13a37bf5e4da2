"""`Project`: a group of experiments inside a workspace (docs/team.md, "Workspaces and
projects"), as Determined's SDK has it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from determined.common import api

if TYPE_CHECKING:
    from determined.common.experimental import experiment


class Project:
    """A project: `id`, `name`, `description`, `archived`, `workspace_id`, `username` (its
    owner), `key`, `n_experiments`, `n_active_experiments` (`reload()` reads them again).
    Changing it needs its owner or an admin."""

    def __init__(self, session: api.Session, project_id: int) -> None:
        """A project by id; its attributes stay unset until `reload()`.

        Args:
            session: a session to the master.
            project_id: the project's id.
        """
        self._session = session
        self.id = project_id
        self.name: str | None = None
        self.description: str | None = None
        self.archived: bool | None = None
        self.workspace_id: int | None = None
        self.username: str | None = None
        self.key: str | None = None
        self.n_experiments: int | None = None
        self.n_active_experiments: int | None = None
        self.notes: list[dict] = []

    def _hydrate(self, answer: dict[str, Any]) -> None:
        self.id = int(answer["id"])
        self.name = answer.get("name")
        self.description = answer.get("description")
        self.archived = bool(answer.get("archived"))
        self.workspace_id = answer.get("workspaceId")
        self.username = answer.get("username")
        self.key = answer.get("key")
        self.n_experiments = answer.get("numExperiments")
        self.n_active_experiments = answer.get("numActiveExperiments")
        self.notes = list(answer.get("notes") or [])

    @classmethod
    def _from_json(cls, answer: dict[str, Any], session: api.Session) -> Project:
        made = cls(session, int(answer["id"]))
        made._hydrate(answer)
        return made

    def reload(self) -> None:
        """Read the project's attributes from the master again."""
        self._hydrate(self._session.get(f"/projects/{self.id}")["project"])

    def _patch(self, **fields: Any) -> None:
        self._hydrate(self._session.patch(f"/projects/{self.id}", fields)["project"])

    def set_name(self, name: str) -> None:
        """Rename the project (unique within its workspace)."""
        self._patch(name=name)

    def set_description(self, description: str) -> None:
        self._patch(description=description)

    def set_key(self, key: str) -> None:
        """The project's key: 1 to 5 letters or digits, unique on the master."""
        self._patch(key=key)

    def archive(self) -> None:
        """Archive the project: it takes no new experiments until `unarchive()`."""
        self._session.post(f"/projects/{self.id}/archive")
        self.archived = True

    def unarchive(self) -> None:
        self._session.post(f"/projects/{self.id}/unarchive")
        self.archived = False

    def list_experiments(self) -> list[experiment.Experiment]:
        """The project's experiments, by id."""
        from determined.common.experimental import experiment

        answers = self._session.get(f"/projects/{self.id}/experiments")["experiments"]
        return [experiment.Experiment._from_json(e, self._session) for e in answers]


__all__ = ["Project"]
