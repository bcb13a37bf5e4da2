"""Checkpoint storage is the master's: where configs may put it, and which paths it touches.

The master deletes and serves checkpoint directories, so a caller who could choose where those
are (an unmanaged run's `checkpoint_storage.host_path`, a reported uuid such as `.ssh`) could
make it read or delete any directory the master's user owns (issue 26, row 1). Three rules:

* a config's storage must lie under one of the master's storage roots (`storage_problem`):
  its own `<root_dir>/checkpoints` and the `MasterLite.checkpoint_storage_roots` it is given;
* a checkpoint uuid is a UUID (`is_checkpoint_uuid`), so it is one plain directory name;
* download and delete act only on a path that is a uuid-named, non-symlink directory that
  resolves under a storage root (`owned_checkpoint_dir`), whatever a record says.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The trait (and its environment variable) that widens where checkpoint storage may be.
ROOTS_SETTING = "MasterLite.checkpoint_storage_roots (env MASTER_LITE_CHECKPOINT_STORAGE_ROOTS)"

# The canonical 8-4-4-4-12 hex form the harness writes (str(uuid.uuid4())).
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_checkpoint_uuid(value: object) -> bool:
    """Whether `value` is a checkpoint uuid: a string in the 8-4-4-4-12 hex form."""
    return isinstance(value, str) and _UUID.fullmatch(value) is not None


def storage_roots(root_dir: Path, extra: Sequence[str | os.PathLike] = ()) -> tuple[Path, ...]:
    """The directories checkpoint storage may lie under: the master's own
    `<root_dir>/checkpoints` first, then `extra` (absolute paths), all resolved."""
    roots = [Path(root_dir) / "checkpoints", *(Path(p) for p in extra)]
    resolved: list[Path] = []
    for root in roots:
        path = root.expanduser().resolve()
        if path not in resolved:
            resolved.append(path)
    return tuple(resolved)


def _under(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def under_storage_roots(path: str | Path, roots: Sequence[Path]) -> bool:
    """Whether `path` (absolute, not a symlink) resolves strictly inside a storage root: a
    directory the master may delete (e.g. an experiment's TensorBoard files)."""
    candidate = Path(path)
    if not candidate.is_absolute() or candidate.is_symlink():
        return False
    resolved = candidate.resolve()
    return any(resolved != root and resolved.is_relative_to(root) for root in roots)


def storage_problem(storage_config: Mapping, roots: Sequence[Path]) -> str | None:
    """Why a config's `checkpoint_storage` may not be used by this master (None: it may).

    The message names the field and the setting that would allow it."""
    from determined.common import storage

    if storage_config.get("type") in ("s3", "gcs"):
        # A bucket: no directory of the master's is read or deleted (checkpoints/_buckets.py).
        check = (
            storage.s3_config_problems
            if storage_config.get("type") == "s3"
            else storage.gcs_config_problems
        )
        problems = check(storage_config)
        return "; ".join(problems) if problems else None
    try:
        base = storage.checkpoint_base(storage_config)
    except ValueError as exc:
        return str(exc)
    if storage_config.get("type") == "directory":
        field = "checkpoint_storage.container_path"
    elif (storage_config.get("storage_path") or ".") != ".":
        field = "checkpoint_storage.host_path/storage_path"
    else:
        field = "checkpoint_storage.host_path"
    if not base.is_absolute():
        return f"{field}: {str(base)!r} must be an absolute path"
    # resolve(): `..` and symlinks in the part that exists are followed before the check.
    if _under(base.resolve(), roots):
        return None
    allowed = ", ".join(str(root) for root in roots)
    return (
        f"{field}: {str(base)!r} is outside the checkpoint storage this master allows "
        f"({allowed}); the master's administrator can allow it with {ROOTS_SETTING}"
    )


def owned_checkpoint_dir(path: str | Path, uuid: str, roots: Sequence[Path]) -> Path | None:
    """The resolved checkpoint directory the master may read or delete for a record of `uuid`
    stored at `path`, or None when it may not: the uuid is not a UUID, the path's last part is
    not the uuid, the path is a symlink, or it does not resolve strictly under a storage root.
    """
    if not is_checkpoint_uuid(uuid):
        return None
    candidate = Path(path)
    if candidate.name != uuid or not candidate.is_absolute() or candidate.is_symlink():
        return None
    resolved = candidate.resolve()
    if resolved.name != uuid or not _under(resolved.parent, roots):
        return None
    return resolved


__all__ = [
    "ROOTS_SETTING",
    "is_checkpoint_uuid",
    "owned_checkpoint_dir",
    "storage_problem",
    "storage_roots",
    "under_storage_roots",
]
