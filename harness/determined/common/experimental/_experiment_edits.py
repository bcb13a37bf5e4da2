"""`Experiment`'s edits of an experiment's metadata (name, description, notes, labels) and
deletion, plus Determined's methods this master has no endpoint for.

A base class of `determined.common.experimental.experiment.Experiment`; nothing here is public by
itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from determined.common import api
from determined.common.experimental import _util


class ExperimentEdits:
    """`Experiment`'s metadata edits and deletion."""

    # Provided by `Experiment`; declared for the type checker only.
    _id: int
    _session: api.Session
    project_id: int | None
    workspace_id: int | None

    if TYPE_CHECKING:

        def _hydrate(self, experiment: dict) -> None: ...

    def delete(self) -> None:
        """Delete the experiment for good: its trials, metrics, logs and checkpoints (their
        files too). Only a finished experiment can be deleted; `archive()` hides one instead.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: it is not finished, or a checkpoint of
                it is still needed by a live trial (409); nothing is deleted then.
        """
        self._session.delete(f"/experiments/{self._id}")

    def _patch(self, **fields: Any) -> None:
        self._hydrate(self._session.patch(f"/experiments/{self._id}", fields)["experiment"])

    def set_name(self, name: str) -> None:
        """Rename the experiment.

        Args:
            name: the new name (not empty).

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: the name is empty (400).
        """
        self._patch(name=name)

    def set_description(self, description: str) -> None:
        """Set (overwrite) the experiment's description.

        Args:
            description: the new description.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        self._patch(description=description)

    def set_notes(self, notes: str) -> None:
        """Set (overwrite) the experiment's notes.

        Args:
            notes: the new notes (free text).

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        self._patch(notes=notes)

    def _current_labels(self) -> list[str]:
        experiment = self._session.get(f"/experiments/{self._id}")["experiment"]
        return list(experiment.get("labels") or [])

    def add_label(self, label: str) -> None:
        """Add a label to the experiment (nothing happens when it has it); `labels` becomes
        the master's labels after it.

        Args:
            label: the label (not empty).

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: the label is empty (400).
        """
        self._patch(labels=[*self._current_labels(), label])

    def remove_label(self, label: str) -> None:
        """Remove a label from the experiment (nothing happens when it lacks it); `labels`
        becomes the master's labels after it.

        Args:
            label: the label.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        self._patch(labels=[x for x in self._current_labels() if x != label])

    def set_labels(self, labels: set[str]) -> None:
        """Replace the experiment's labels.

        Args:
            labels: the new labels (none empty).

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: a label is empty (400).
        """
        self._patch(labels=sorted(labels))

    def move_to_project(self, workspace_name: str, project_name: str) -> None:
        """Move the experiment into another project (its owner or an admin).

        Args:
            workspace_name: the destination project's workspace.
            project_name: the destination project.

        Raises:
            determined.common.api.errors.NotFoundException: no such workspace or project.
            determined.common.api.errors.APIException: another user's experiment (403), or
                an archived project (400).
        """
        from determined.common.experimental.workspace import Workspace

        project = Workspace(self._session, workspace_name=workspace_name).get_project(project_name)
        body = {"destinationProjectId": project.id, "experimentId": self._id}
        self._session.post(f"/experiments/{self._id}/move", body)
        self.project_id, self.workspace_id = project.id, project.workspace_id

    def delete_tensorboard_files(self) -> None:
        """Delete the experiment's TensorBoard files (not available here).

        Raises:
            NotImplementedError: this master has no endpoint for it.
        """
        raise _util.missing_endpoint("Experiment.delete_tensorboard_files()")
