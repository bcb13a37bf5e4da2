"""The model registry part: named models and their numbered versions, each one checkpoint.

Determined's registry rules, kept here in one place: a model's name is unique in any case (a
name equal to another model's but for case is refused, as Determined refuses it; lookups by
name stay exact), not blank, without slashes or double spaces, and not only digits (so that a path segment is a
name or an id, never both); an archived model can only be read, unarchived or deleted; a
version can only be registered for a COMPLETED checkpoint. A checkpoint a version names is
never deleted (checkpoint GC and `DELETE /checkpoints/{uuid}` check `Checkpoints.
registered_uuids`). Every change publishes a `model` event with the model's JSON (a deleted
model's carries `deleted: true`), which the sidebar follows.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from determined.common.states import CheckpointState
from master_lite import errors
from master_lite._core import _limits, _serialize
from master_lite._core._auth import OWNER_ID
from master_lite._core._shared import MasterState
from master_lite.checkpoints._checkpoints import Checkpoints
from master_lite.store import MODEL_ORDERS, ModelRow, ModelVersionRow

_ONLY_DIGITS = re.compile(r"^[0-9]+$")


def _invalid(path: str, problem: str) -> errors.InvalidRequest:
    return errors.InvalidRequest(f"{path}: {problem}", [f"{path}: {problem}"])


def check_model_name(name: Any, path: str = "name") -> str:
    """The name, if it may name a model; InvalidRequest saying what is wrong otherwise."""
    if not isinstance(name, str) or not name.replace(" ", ""):
        raise _invalid(path, "model names cannot be blank (give a name, e.g. 'mnist-cnn')")
    if "  " in name:
        raise _invalid(path, f"model names cannot have excessive spacing, got {name!r}")
    if "/" in name or "\\" in name:
        raise _invalid(path, f"model names cannot have slashes, got {name!r}")
    if name.strip() in (".", ".."):
        # A URL path segment "." or ".." is removed by URL normalisation: no URL could name it.
        raise _invalid(path, f"model names cannot be {name.strip()!r} (no URL can name it)")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise _invalid(path, f"model names cannot have control characters, got {name!r}")
    if _ONLY_DIGITS.match(name):
        raise _invalid(
            path, f"model names cannot be only numbers (a number names a model id), got {name!r}"
        )
    return name


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _invalid(path, f"expected a string, got {type(value).__name__}")
    return value


def _metadata(value: Any, path: str = "metadata") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(path, f"expected a JSON object, got {type(value).__name__}")
    # NaN/Infinity (bare tokens, or 1e400) mean nothing as metadata: refused, not stored.
    where = _serialize.non_finite_path(value, path)
    if where is not None:
        raise _invalid(where, "a finite number is required (NaN and Infinity are refused)")
    problem = _limits.metadata_problem(value, path)
    if problem:
        raise errors.InvalidRequest(problem, [problem])
    return value


def _labels(value: Any, path: str = "labels") -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _invalid(path, "expected a list of non-empty strings")
    return list(dict.fromkeys(value))  # repeats dropped, order kept


def _checked_edits(changes: dict[str, Any], text_fields: tuple[str, ...]) -> dict[str, Any]:
    """The edits of a model's or a version's attributes among `changes`, each checked: the text
    fields, metadata (replaces the old) and labels (replace the old, repeats dropped)."""
    checked: dict[str, Any] = {}
    for field in text_fields:
        if field in changes:
            checked[field] = _text(changes[field], field)
    if "metadata" in changes:
        checked["metadata"] = _metadata(changes["metadata"])
    if "labels" in changes:
        checked["labels"] = _labels(changes["labels"])
    return checked


class Models:
    """Owns the registry: creates, reads, edits and deletes models and their versions."""

    def __init__(self, shared: MasterState, *, checkpoints: Checkpoints) -> None:
        self._shared = shared
        self._checkpoints = checkpoints

    # -- reads ------------------------------------------------------------------------------
    def model_row(self, identifier: str | int) -> ModelRow:
        """The model named `identifier`, or with that id when it is a number; NotFound."""
        text = str(identifier)
        if _ONLY_DIGITS.match(text):
            # A number past SQLite's 64-bit ids names no model (and would overflow the query).
            number = int(text)
            row = self._shared.store.models.get(number) if number < 2**63 else None
            if row is None:
                raise errors.NotFound(f"model {text} not found")
            return row
        row = self._shared.store.models.by_name(text)
        if row is None:
            raise errors.NotFound(f"model {text!r} not found")
        return row

    def _model_json(self, row: ModelRow, num_versions: int | None = None) -> dict:
        if num_versions is None:
            num_versions = self._shared.store.model_versions.counts([row.id])[row.id]
        return {
            "id": row.id,
            "name": row.name,
            "description": row.description,
            "notes": row.notes,
            "metadata": row.metadata,
            "labels": row.labels,
            "archived": row.archived,
            "creation_time": _serialize.iso(row.creation_time),
            "last_updated_time": _serialize.iso(row.last_updated_time),
            "num_versions": num_versions,
            # Determined's owner fields (docs/team.md).
            "userId": row.owner_id,
            "username": self._shared.store.users.names().get(row.owner_id),
        }

    def _version_json(self, model: ModelRow, row: ModelVersionRow) -> dict:
        try:
            checkpoint: dict | None = self._checkpoints.get_checkpoint(row.checkpoint_uuid)
        except errors.NotFound:
            checkpoint = None  # its record is gone (the registry kept only the uuid)
        return {
            "id": row.id,
            "model_id": model.id,
            "model_name": model.name,
            "version": row.version,
            "checkpoint_uuid": row.checkpoint_uuid,
            "checkpoint": checkpoint,
            "name": row.name,
            "comment": row.comment,
            "notes": row.notes,
            "metadata": row.metadata,
            "labels": row.labels,
            "creation_time": _serialize.iso(row.creation_time),
            "last_updated_time": _serialize.iso(row.last_updated_time),
        }

    def get_model(self, identifier: str | int) -> dict:
        """One model as API JSON (with its number of versions)."""
        return self._model_json(self.model_row(identifier))

    def list_models(
        self,
        *,
        model_id: int | None = None,
        name: str | None = None,
        description: str | None = None,
        labels: list[str] | None = None,
        archived: bool | None = None,
        sort_by: str = "name",
        order_by: str = "asc",
    ) -> list[dict]:
        """Models matching every filter given (see `store.models.matching`), sorted by
        `sort_by` (one of MODEL_ORDERS), `order_by` asc or desc."""
        if sort_by not in MODEL_ORDERS:
            raise _invalid("sort_by", f"one of {', '.join(MODEL_ORDERS)}, got {sort_by!r}")
        if order_by not in ("asc", "desc"):
            raise _invalid("order_by", f"asc or desc, got {order_by!r}")
        rows = self._shared.store.models.matching(
            model_id=model_id,
            name=name,
            description=description,
            labels=labels,
            archived=archived,
            sort_by=sort_by,
            descending=order_by == "desc",
        )
        counts = self._shared.store.model_versions.counts(row.id for row in rows)
        return [self._model_json(row, counts[row.id]) for row in rows]

    def model_labels(self) -> list[str]:
        """Every label some model has, sorted."""
        return self._shared.store.models.all_labels()

    def version_row(self, model: ModelRow, version: int) -> ModelVersionRow:
        """Version number `version` of the model; NotFound naming the versions it has."""
        row = self._shared.store.model_versions.find(model.id, version)
        if row is None:
            have = [v.version for v in self._shared.store.model_versions.of_model(model.id)]
            listing = ", ".join(map(str, have)) if have else "none yet"
            raise errors.NotFound(
                f"model {model.name!r} has no version {version} (its versions: {listing})"
            )
        return row

    def list_versions(self, identifier: str | int, *, order_by: str = "asc") -> list[dict]:
        """The model's versions by version number (`order_by` asc or desc)."""
        if order_by not in ("asc", "desc"):
            raise _invalid("order_by", f"asc or desc, got {order_by!r}")
        model = self.model_row(identifier)
        rows = self._shared.store.model_versions.of_model(model.id, descending=order_by == "desc")
        return [self._version_json(model, row) for row in rows]

    def get_version(self, identifier: str | int, version: int) -> dict:
        """One version of a model as API JSON, with its checkpoint."""
        model = self.model_row(identifier)
        return self._version_json(model, self.version_row(model, version))

    def checkpoint_versions(self, checkpoint_uuid: str) -> list[dict]:
        """The versions that name a checkpoint, `{model_id, model_name, version}` each
        (NotFound for an unknown checkpoint): what a trial asks before deleting its files."""
        self._checkpoints.checkpoint_row(checkpoint_uuid)
        return [
            {"model_id": model_id, "model_name": name, "version": version}
            for model_id, name, version in self._shared.store.model_versions.naming(checkpoint_uuid)
        ]

    # -- writes -----------------------------------------------------------------------------
    def _publish(self, model_id: int) -> dict:
        model = self._model_json(self._shared.store.models.get(model_id))  # type: ignore[arg-type]
        self._shared.events.publish("model", model)
        return model

    def _editable(self, identifier: str | int, what: str) -> ModelRow:
        model = self.model_row(identifier)
        if model.archived:
            raise errors.Conflict(
                f"model {model.name!r} is archived and cannot {what}: unarchive it first"
            )
        return model

    def create_model(
        self,
        name: Any,
        *,
        description: Any = "",
        notes: Any = "",
        metadata: Any = None,
        labels: Any = None,
        owner_id: int = OWNER_ID,
    ) -> dict:
        """A new model (InvalidRequest for a bad field, Conflict when the name is taken),
        owned by `owner_id` (docs/team.md)."""
        name = check_model_name(name)
        fields: dict[str, Any] = {
            "description": _text(description or "", "description"),
            "notes": _text(notes or "", "notes"),
            "metadata": _metadata(metadata if metadata is not None else {}),
            "labels": _labels(labels if labels is not None else []),
            "owner_id": int(owner_id),
        }
        self._check_name_free(name)
        try:
            model_id = self._shared.store.models.create(name=name, **fields)
        except sqlite3.IntegrityError:
            raise self._name_taken(name) from None
        return self._publish(model_id)

    def _check_name_free(self, name: str, renamed: ModelRow | None = None) -> None:
        """Conflict when another model (not `renamed`) has this name in any case."""
        for other in self._shared.store.models.named_in_any_case(name):
            if renamed is None or other.id != renamed.id:
                raise self._name_taken(other.name)

    @staticmethod
    def _name_taken(name: str) -> errors.Conflict:
        return errors.Conflict(
            f"a model named {name!r} already exists (names are unique in any case, as in "
            "Determined): choose another name, or use that model"
        )

    def patch_model(self, identifier: str | int, changes: dict[str, Any]) -> dict:
        """Change a model's name, description, notes, metadata or labels (those given;
        metadata and labels replace the old ones). Conflict for an archived model."""
        model = self._editable(identifier, "have attributes updated")
        checked = _checked_edits(changes, ("description", "notes"))
        if "name" in changes and changes["name"] != model.name:
            checked["name"] = check_model_name(changes["name"])
            self._check_name_free(checked["name"], renamed=model)
        if checked:
            self._shared.store.models.edit(model.id, **checked)
        return self._publish(model.id)

    def set_archived(self, identifier: str | int, archived: bool) -> dict:
        """Archive (read-only from then on) or unarchive a model."""
        model = self.model_row(identifier)
        if model.archived != archived:
            self._shared.store.models.edit(model.id, archived=archived)
        return self._publish(model.id)

    def delete_model(self, identifier: str | int) -> None:
        """Delete a model and its versions (their checkpoints stay, and become GC's again
        only by their own experiments' rules)."""
        model = self.model_row(identifier)
        self._shared.store.models.delete(model.id)
        self._shared.events.publish("model", {"id": model.id, "name": model.name, "deleted": True})

    def register_version(
        self,
        identifier: str | int,
        checkpoint_uuid: Any,
        *,
        name: Any = "",
        comment: Any = "",
        notes: Any = "",
        metadata: Any = None,
        labels: Any = None,
    ) -> dict:
        """Register a COMPLETED checkpoint as the model's next version; its JSON."""
        model = self._editable(identifier, "register new versions")
        if not isinstance(checkpoint_uuid, str) or not checkpoint_uuid:
            raise _invalid("checkpoint_uuid", "required (the uuid of a COMPLETED checkpoint)")
        fields: dict[str, Any] = {
            "name": _text(name or "", "name"),
            "comment": _text(comment or "", "comment"),
            "notes": _text(notes or "", "notes"),
            "metadata": _metadata(metadata if metadata is not None else {}),
            "labels": _labels(labels if labels is not None else []),
        }
        checkpoint = self._checkpoints.checkpoint_row(checkpoint_uuid)  # NotFound names it
        if checkpoint.state != CheckpointState.COMPLETED:
            raise errors.Conflict(
                f"checkpoint {checkpoint_uuid} is {checkpoint.state}: checkpoints for model "
                "versions must be in a COMPLETED state"
            )
        version_id = self._shared.store.model_versions.register(model.id, checkpoint_uuid, **fields)
        self._publish(model.id)
        row = self._shared.store.model_versions.get(version_id)
        assert row is not None  # just inserted
        return self._version_json(self.model_row(model.id), row)

    def patch_version(self, identifier: str | int, version: int, changes: dict[str, Any]) -> dict:
        """Change a version's name, comment, notes, metadata or labels (those given)."""
        model = self._editable(identifier, "have its versions updated")
        row = self.version_row(model, version)
        checked = _checked_edits(changes, ("name", "comment", "notes"))
        if checked:
            self._shared.store.model_versions.edit(row.id, **checked)
        self._publish(model.id)
        return self.get_version(model.id, version)

    def delete_version(self, identifier: str | int, version: int) -> None:
        """Delete one version of a model (its checkpoint stays)."""
        model = self.model_row(identifier)
        row = self.version_row(model, version)
        self._shared.store.model_versions.delete(row.id)
        self._publish(model.id)


__all__ = ["Models", "check_model_name"]
