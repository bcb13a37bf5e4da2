"""`Model` and `ModelVersion`: the model registry of the master (Determined's
`determined.common.experimental.model`).

A model is a unique name with a description, notes, metadata and labels; each of its versions
names one checkpoint, which the master then never garbage-collects or deletes. Model names
cannot be only digits: a number given where a model is expected is its id.
"""

from __future__ import annotations

import datetime
import enum
import json
import warnings
from collections.abc import Iterable
from typing import Any

from determined.common import api
from determined.common.experimental import _util
from determined.common.experimental._model_version import (
    ModelVersion,
    direction,
    model_path,
    parse_time,
)
from determined.common.experimental._util import OrderBy


class ModelSortBy(enum.Enum):
    """A model field to sort `list_models` by (Determined's values; WORKSPACE sorts by id
    here: this master has one workspace)."""

    NAME = "SORT_BY_NAME"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    CREATION_TIME = "SORT_BY_CREATION_TIME"
    LAST_UPDATED_TIME = "SORT_BY_LAST_UPDATED_TIME"
    NUM_VERSIONS = "SORT_BY_NUM_VERSIONS"
    WORKSPACE = "SORT_BY_WORKSPACE"

    def _query_value(self) -> str:
        return "id" if self is ModelSortBy.WORKSPACE else self.name.lower()


class ModelOrderBy(enum.Enum):
    """Deprecated in Determined in favour of `OrderBy`; the same values."""

    ASCENDING = "ORDER_BY_ASC"
    ASC = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"
    DESC = "ORDER_BY_DESC"


class Model:
    """A model of the registry, from `create_model` or `get_model`.

    Attributes:
        name: the model's unique name.
        model_id: its id.
        description: its description ("" when none).
        notes: its notes (a readme).
        metadata: its metadata (a dict).
        labels: its labels.
        archived: whether it is archived (read-only until unarchived).
        creation_time: when it was created (a `datetime`).
        last_updated_time: when it or its versions last changed.
        num_versions: how many versions it has (ours).
        username: always "" here (one user), kept for Determined's signature.
        workspace_id: always None here (one workspace).

    All attributes are cached; the methods that change them update them, `reload()` reads all.
    """

    def __init__(self, session: api.Session, name: str) -> None:
        """A model by name; its attributes stay None until `reload()`."""
        self._session = session
        self.name = name
        self.model_id: int | None = None
        self.description: str | None = None
        self.notes: str | None = None
        self.creation_time: datetime.datetime | None = None
        self.last_updated_time: datetime.datetime | None = None
        self.metadata: dict[str, Any] | None = None
        self.labels: list[str] | None = None
        self.archived: bool | None = None
        self.num_versions: int | None = None
        self.username = ""
        self.workspace_id: int | None = None

    def _path(self) -> str:
        return model_path(self.model_id if self.model_id is not None else self.name)

    def _patch(self, **changes: Any) -> None:
        self._hydrate(self._session.patch(self._path(), changes)["model"])

    def get_version(self, version: int = -1) -> ModelVersion | None:
        """One version of the model; -1 (the default) for the latest, None when it has none.

        Args:
            version: the version number, or -1.

        Raises:
            determined.common.api.errors.NotFoundException: no such version (the message
                lists the versions the model has).
        """
        if version == -1:
            answer = self._session.get(f"{self._path()}/versions", params={"order_by": "desc"})
            latest = answer["model_versions"]
            return ModelVersion._from_json(latest[0], self._session) if latest else None
        answer = self._session.get(f"{self._path()}/versions/{int(version)}")
        return ModelVersion._from_json(answer["model_version"], self._session)

    def list_versions(self, order_by: OrderBy = OrderBy.DESC) -> list[ModelVersion]:
        """The model's versions by version number, newest first by default.

        Args:
            order_by: `OrderBy.DESC` (default) or `OrderBy.ASC`.
        """
        answer = self._session.get(
            f"{self._path()}/versions", params={"order_by": direction(order_by)}
        )
        return [ModelVersion._from_json(v, self._session) for v in answer["model_versions"]]

    def get_versions(self, order_by: OrderBy = OrderBy.DESC) -> list[ModelVersion]:
        """Deprecated in Determined (FutureWarning): the same as `list_versions`."""
        warnings.warn(
            "Model.get_versions() is deprecated; call Model.list_versions() instead",
            FutureWarning,
            stacklevel=2,
        )
        return self.list_versions(order_by)

    def register_version(self, checkpoint_uuid: str) -> ModelVersion:
        """Register a checkpoint as the model's next version; the master keeps its files from
        then on (no GC, no deletion) until no version names it.

        Args:
            checkpoint_uuid: the UUID of a COMPLETED checkpoint.

        Raises:
            determined.common.api.errors.NotFoundException: no checkpoint has this UUID.
            determined.common.api.errors.APIException: the checkpoint is not COMPLETED, or
                the model is archived (409).
        """
        answer = self._session.post(
            f"{self._path()}/versions", {"checkpoint_uuid": str(checkpoint_uuid)}
        )
        self.reload()  # its version count and last update changed
        return ModelVersion._from_json(answer["model_version"], self._session)

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Add (or replace) top-level keys of the model's metadata.

        Args:
            metadata: a JSON-serializable dict.
        """
        if not isinstance(metadata, dict):
            raise ValueError(f"add_metadata() requires a dict as input but got: {metadata!r}")
        self._patch(metadata={**(self.metadata or {}), **metadata})

    def remove_metadata(self, keys: list[str]) -> None:
        """Remove top-level keys from the model's metadata (absent keys are ignored).

        Args:
            keys: the keys to remove.
        """
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
            raise ValueError(
                f"remove_metadata() requires a list of strings as input but got: {keys!r}"
            )
        gone = set(keys)
        self._patch(metadata={k: v for k, v in (self.metadata or {}).items() if k not in gone})

    def set_labels(self, labels: Iterable[str]) -> None:
        """Replace the model's labels.

        Args:
            labels: all its labels (non-empty strings).
        """
        if isinstance(labels, str) or not isinstance(labels, Iterable):
            raise ValueError(f"set_labels() requires a list of strings as input but got: {labels}")
        self._patch(labels=list(labels))

    def set_description(self, description: str) -> None:
        """Replace the model's description."""
        self._patch(description=description)

    def set_notes(self, notes: str) -> None:
        """Replace the model's notes (ours; Determined sets them through the web UI)."""
        self._patch(notes=notes)

    def set_name(self, name: str) -> None:
        """Rename the model (ours; Determined renames through the web UI).

        Raises:
            determined.common.api.errors.APIException: the name is taken (409) or not a
                valid model name (400).
        """
        self._patch(name=name)

    def move_to_workspace(self, workspace_name: str) -> None:
        """Workspaces do not exist here.

        Raises:
            NotImplementedError: always.
        """
        raise _util.missing_endpoint("Model.move_to_workspace")

    def archive(self) -> None:
        """Archive the model: read-only (no edits, no new versions) until unarchived."""
        self._hydrate(self._session.post(f"{self._path()}/archive")["model"])

    def unarchive(self) -> None:
        """Unarchive the model."""
        self._hydrate(self._session.post(f"{self._path()}/unarchive")["model"])

    def delete(self) -> None:
        """Delete the model and its versions (their checkpoints stay)."""
        self._session.delete(self._path())

    def _hydrate(self, model: dict) -> None:
        self.model_id = int(model["id"])
        self.name = model["name"]
        self.description = model.get("description") or ""
        self.notes = model.get("notes") or ""
        self.metadata = dict(model.get("metadata") or {})
        self.labels = list(model.get("labels") or [])
        self.archived = bool(model.get("archived"))
        self.creation_time = parse_time(model.get("creation_time"))
        self.last_updated_time = parse_time(model.get("last_updated_time"))
        self.num_versions = model.get("num_versions")

    def reload(self) -> None:
        """Read every attribute again from the master.

        Raises:
            determined.common.api.errors.NotFoundException: the model is gone.
        """
        self._hydrate(self._session.get(self._path())["model"])

    @classmethod
    def _from_json(cls, model: dict, session: api.Session) -> Model:
        made = cls(session, str(model["name"]))
        made._hydrate(model)
        return made

    def __repr__(self) -> str:
        return f"Model(id={self.model_id}, name={self.name}, metadata={json.dumps(self.metadata)})"


def list_model_answers(
    session: api.Session,
    *,
    sort_by: ModelSortBy,
    order_by: OrderBy | ModelOrderBy,
    name: str | None,
    description: str | None,
    model_id: int | None,
    labels: list[str] | None,
    archived: bool | None,
) -> list[dict]:
    """The models (API objects) matching Determined's `list_models` filters, sorted."""
    params: dict[str, Any] = {
        "sort_by": ModelSortBy(sort_by)._query_value(),
        "order_by": direction(order_by),
    }
    if name:
        params["name"] = name
    if description:
        params["description"] = description
    if model_id is not None:
        params["id"] = int(model_id)
    if labels:
        params["labels"] = ",".join(labels)
    if archived is not None:
        params["archived"] = "true" if archived else "false"
    return list(session.get("/models", params=params)["models"])


__all__ = [
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "ModelVersion",
    "list_model_answers",
    "model_path",
]
