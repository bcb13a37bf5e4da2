"""`ModelVersion`: one version of a registry model (Determined's
`determined.common.experimental.model.ModelVersion`, re-exported there), and what `Model` and
`ModelVersion` share: model paths, times, sort directions."""

from __future__ import annotations

import datetime
import urllib.parse
import warnings
from typing import Any

from determined.common import api
from determined.common.experimental import _util, checkpoint
from determined.common.experimental._util import OrderBy


def parse_time(value: str | None) -> datetime.datetime | None:
    if not value:
        return None
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def model_path(identifier: str | int) -> str:
    """`/models/<name or id>`, the name quoted for a URL path segment."""
    return "/models/" + urllib.parse.quote(str(identifier), safe="")


def direction(order_by: OrderBy | Any) -> str:
    value = getattr(order_by, "value", order_by)
    return "desc" if value == OrderBy.DESC.value else "asc"


class ModelVersion:
    """One version of a model: a checkpoint registered under the model's name.

    Attributes:
        model_version: the version number (1, 2, ... within the model).
        model_name: the model's name.
        model_id: the model's id.
        checkpoint: the `Checkpoint` this version names (None only when the master lost its
            record); `checkpoint.download()` fetches its files.
        metadata: this version's own metadata.
        name: a human-friendly name of this version ("" when none).
        comment: a comment on this version.
        notes: notes (a readme) of this version.
        labels: this version's labels.
        creation_time: when it was registered (a `datetime`).

    All attributes are cached; `set_name`/`set_notes` update them and `reload()` reads them all.
    """

    def __init__(self, session: api.Session, model_version: int, model_name: str) -> None:
        """A version by model name and number; its attributes stay None until `reload()`."""
        self._session = session
        self.model_name = model_name
        self.model_version = model_version
        self.model_id: int | None = None
        self.checkpoint: checkpoint.Checkpoint | None = None
        self.metadata: dict[str, Any] | None = None
        self.name: str | None = None
        self.comment: str | None = None
        self.notes: str | None = None
        self.labels: list[str] | None = None
        self.creation_time: datetime.datetime | None = None
        self.last_updated_time: datetime.datetime | None = None

    @property
    def version(self) -> int:
        """The version number (the same as `model_version`)."""
        return self.model_version

    def _path(self) -> str:
        owner = self.model_id if self.model_id is not None else self.model_name
        return f"{model_path(owner)}/versions/{int(self.model_version)}"

    def _patch(self, **changes: Any) -> None:
        self._hydrate(self._session.patch(self._path(), changes)["model_version"])

    def set_name(self, name: str) -> None:
        """Set the human-friendly name of this version.

        Args:
            name: the new name.

        Raises:
            determined.common.api.errors.APIException: the model is archived (409).
        """
        self._patch(name=name)

    def set_notes(self, notes: str) -> None:
        """Replace the notes (readme) of this version.

        Args:
            notes: the new notes.

        Raises:
            determined.common.api.errors.APIException: the model is archived (409).
        """
        self._patch(notes=notes)

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Replace this version's metadata (ours; Determined has no SDK method for it).

        Args:
            metadata: a JSON-serializable dict.
        """
        self._patch(metadata=metadata)

    def delete(self) -> None:
        """Delete this version from the registry (its checkpoint stays, and may be deleted
        or garbage-collected again once no version names it).

        Raises:
            determined.common.api.errors.NotFoundException: the version is gone already.
        """
        self._session.delete(self._path())

    def get_metrics(self, group: str | None = None) -> Any:
        """Deprecated in Determined (FutureWarning): the same as `iter_metrics`."""
        warnings.warn(
            "ModelVersion.get_metrics() is deprecated; call ModelVersion.iter_metrics() instead",
            FutureWarning,
            stacklevel=2,
        )
        return self.iter_metrics(group)

    def iter_metrics(self, group: str | None = None) -> Any:
        """Metrics of tasks that used this version: not kept by this master.

        Raises:
            NotImplementedError: always (see docs/sdk.md, 'Not implemented').
        """
        raise _util.missing_endpoint("ModelVersion.iter_metrics")

    def _hydrate(self, version: dict) -> None:
        self.model_version = int(version["version"])
        self.model_id = int(version["model_id"])
        self.model_name = version.get("model_name") or self.model_name
        found = version.get("checkpoint")
        self.checkpoint = (
            checkpoint.Checkpoint._from_json(found, self._session) if found is not None else None
        )
        self.metadata = dict(version.get("metadata") or {})
        self.name = version.get("name") or ""
        self.comment = version.get("comment") or ""
        self.notes = version.get("notes") or ""
        self.labels = list(version.get("labels") or [])
        self.creation_time = parse_time(version.get("creation_time"))
        self.last_updated_time = parse_time(version.get("last_updated_time"))

    def reload(self) -> None:
        """Read every attribute again from the master.

        Raises:
            determined.common.api.errors.NotFoundException: the version or its model is gone.
        """
        self._hydrate(self._session.get(self._path())["model_version"])

    @classmethod
    def _from_json(cls, version: dict, session: api.Session) -> ModelVersion:
        made = cls(session, int(version["version"]), str(version.get("model_name") or ""))
        made._hydrate(version)
        return made

    def __repr__(self) -> str:
        return (
            f"ModelVersion(model_name={self.model_name}, version={self.model_version}, "
            f"checkpoint_uuid={self.checkpoint.uuid if self.checkpoint else None})"
        )


__all__ = ["ModelVersion", "direction", "model_path", "parse_time"]
