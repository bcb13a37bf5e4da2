"""The model registry's reads and writes: the `models` and `model_versions` tables (migration 5).

Names are stored as written and looked up exactly; a new name that equals another model's in
any case is refused by the `Models` part (`named_in_any_case`), as Determined refuses it.

A model is a name with a description, notes, metadata and labels; its versions are numbered
1, 2, ... in the order they were registered, each naming one checkpoint. As in Determined, a
new version is numbered one past the model's highest (so deleting the highest frees its
number). Deleting a model deletes its versions (ON DELETE CASCADE).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from . import _queries
from ._repositories import CHUNK, TypedRepository, marks
from ._rows import ModelRow, ModelVersionRow

# What models may be listed by: the API's sort_by values, as ORDER BY expressions (the model's
# id breaks ties, so a listing's order is stable).
MODEL_ORDERS: dict[str, str] = {
    "id": "id",
    "name": "name",
    "description": "description",
    "creation_time": "creation_time",
    "last_updated_time": "last_updated_time",
    "num_versions": "(SELECT COUNT(*) FROM model_versions v WHERE v.model_id = models.id)",
}


class Models(TypedRepository[ModelRow]):
    """The `models` table."""

    row_type = ModelRow

    def by_name(self, name: str) -> ModelRow | None:
        """The model with exactly this name (case-sensitive), or None."""
        rows = self._select("name = ?", (name,))
        return rows[0] if rows else None

    def named_in_any_case(self, name: str) -> list[ModelRow]:
        """The models whose name equals `name` ignoring case (Unicode case folding, which
        SQLite's lower() does not do beyond ASCII: the names are compared here)."""
        wanted = name.casefold()
        return [row for row in self._select("", (), order="id") if row.name.casefold() == wanted]

    def create(
        self,
        *,
        name: str,
        description: str = "",
        notes: str = "",
        metadata: dict[str, Any] | None = None,
        labels: list[str] | None = None,
        owner_id: int = 1,
    ) -> int:
        """Insert a new model; its id (sqlite3.IntegrityError when the name is taken)."""
        now = time.time()
        return self._insert(
            name=name,
            description=description,
            notes=notes,
            metadata=metadata or {},
            labels=labels or [],
            archived=False,
            creation_time=now,
            last_updated_time=now,
            owner_id=owner_id,
        )

    def edit(self, model_id: int, **changes: Any) -> None:
        """Write `changes` (column=value) and stamp the model's last update."""
        self._update(model_id, **changes, last_updated_time=time.time())

    def matching(
        self,
        *,
        model_id: int | None = None,
        name: str | None = None,
        description: str | None = None,
        labels: Sequence[str] | None = None,
        archived: bool | None = None,
        sort_by: str = "name",
        descending: bool = False,
    ) -> list[ModelRow]:
        """Models matching every filter given: `name`, `description`: a case-insensitive part;
        `labels`: the model has all of them. Sorted by one of MODEL_ORDERS."""
        if sort_by not in MODEL_ORDERS:
            raise ValueError(f"sort_by: one of {', '.join(MODEL_ORDERS)}, got {sort_by!r}")
        where: list[str] = []
        params: list[Any] = []
        if model_id is not None:
            where.append("id = ?")
            params.append(int(model_id))
        for column, part in (("name", name), ("description", description)):
            if part:
                where.append(f"instr(lower({column}), lower(?)) > 0")
                params.append(part)
        if labels:
            where.append(
                "NOT EXISTS (SELECT 1 FROM json_each(?) wanted WHERE wanted.value NOT IN "
                "(SELECT value FROM json_each(models.labels)))"
            )
            params.append(json.dumps(list(labels)))
        if archived is not None:
            where.append("archived = ?")
            params.append(int(bool(archived)))
        direction = "DESC" if descending else "ASC"
        order = f"{MODEL_ORDERS[sort_by]} {direction}, id {direction}"
        return self._select(" AND ".join(where), params, order=order)

    def all_labels(self) -> list[str]:
        """Every label some model has, sorted."""
        rows = _queries._rows(
            self._store,
            "SELECT DISTINCT l.value FROM models, json_each(models.labels) l ORDER BY l.value",
            (),
        )
        return [row[0] for row in rows]

    def delete(self, model_id: int) -> None:
        """Delete the model and its versions."""
        self._store.execute("DELETE FROM models WHERE id = ?", (int(model_id),))


class ModelVersions(TypedRepository[ModelVersionRow]):
    """The `model_versions` table."""

    row_type = ModelVersionRow

    def of_model(self, model_id: int, *, descending: bool = False) -> list[ModelVersionRow]:
        """The model's versions by version number."""
        order = "version DESC" if descending else "version"
        return self._select("model_id = ?", (int(model_id),), order=order)

    def find(self, model_id: int, version: int) -> ModelVersionRow | None:
        """Version number `version` of the model, or None."""
        rows = self._select("model_id = ? AND version = ?", (int(model_id), int(version)))
        return rows[0] if rows else None

    def counts(self, model_ids: Iterable[int]) -> dict[int, int]:
        """How many versions each of these models has (0 when none)."""
        ids = [int(i) for i in model_ids]
        counts = dict.fromkeys(ids, 0)
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            for model_id, count in _queries._rows(
                self._store,
                "SELECT model_id, COUNT(*) FROM model_versions "
                f"WHERE model_id IN ({marks(chunk)}) GROUP BY model_id",
                chunk,
            ):
                counts[model_id] = count
        return counts

    def register(
        self,
        model_id: int,
        checkpoint_uuid: str,
        *,
        name: str = "",
        comment: str = "",
        notes: str = "",
        metadata: dict[str, Any] | None = None,
        labels: list[str] | None = None,
    ) -> int:
        """Add the model's next version (one past its highest) for the checkpoint; its id.
        The model's last update is stamped in the same transaction."""
        now = time.time()
        with self._store.transaction():
            highest = self._store.scalar(
                "SELECT MAX(version) FROM model_versions WHERE model_id = ?", (int(model_id),)
            )
            version_id = self._insert(
                model_id=int(model_id),
                version=int(highest or 0) + 1,
                checkpoint_uuid=checkpoint_uuid,
                name=name,
                comment=comment,
                notes=notes,
                metadata=metadata or {},
                labels=labels or [],
                creation_time=now,
                last_updated_time=now,
            )
            self._store.update(ModelRow.TABLE, int(model_id), last_updated_time=now)
        return version_id

    def edit(self, version_id: int, **changes: Any) -> None:
        """Write `changes` (column=value) and stamp the version's last update."""
        self._update(version_id, **changes, last_updated_time=time.time())

    def delete(self, version_id: int) -> None:
        """Delete one version (its checkpoint stays)."""
        self._store.execute("DELETE FROM model_versions WHERE id = ?", (int(version_id),))

    def registered_among(self, uuids: Iterable[str]) -> set[str]:
        """Those of `uuids` that some model version names."""
        wanted = list(dict.fromkeys(uuids))
        found: set[str] = set()
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            found.update(
                row[0]
                for row in _queries._rows(
                    self._store,
                    "SELECT DISTINCT checkpoint_uuid FROM model_versions "
                    f"WHERE checkpoint_uuid IN ({marks(chunk)})",
                    chunk,
                )
            )
        return found

    def naming(self, checkpoint_uuid: str) -> list[tuple[int, str, int]]:
        """(model id, model name, version) of every version that names the checkpoint."""
        rows = _queries._rows(
            self._store,
            "SELECT m.id, m.name, v.version FROM model_versions v JOIN models m "
            "ON m.id = v.model_id WHERE v.checkpoint_uuid = ? ORDER BY m.name, v.version",
            (checkpoint_uuid,),
        )
        return [(row[0], row[1], row[2]) for row in rows]


def registered_message(checkpoint_uuid: str, versions: list[tuple[int, str, int]]) -> str:
    """Why a checkpoint that model versions name cannot be deleted, and what to do."""
    named = ", ".join(f"version {version} of model {name!r}" for _, name, version in versions)
    return (
        f"checkpoint {checkpoint_uuid} is registered in the model registry ({named}) and cannot "
        "be deleted: delete those model versions first (det model delete-version)"
    )


__all__ = ["MODEL_ORDERS", "ModelVersions", "Models", "registered_message"]
