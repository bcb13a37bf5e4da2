"""Who may read what (`MasterLite.read_access`, docs/team.md "Who may read").

"all" (the default): every signed-in user reads everything, as before. "own": a user who is
not an admin reads only what they own (an experiment and, through it, its trials, metrics,
logs, checkpoints, context and config; a model; a TensorBoard; a workspace or project) plus the
default workspace and project; admins and the owner account (the master token) read
everything. Trial tokens are not users: their scopes apply instead. An object a user may not
read is answered as if it did not exist (404), as Determined does, so its existence is not
leaked.
"""

from __future__ import annotations

from typing import Any

from master_lite import errors
from master_lite._core._auth import UserPrincipal
from master_lite.store import DEFAULT_PROJECT_ID, DEFAULT_WORKSPACE_ID

READ_ACCESS = ("all", "own")
# The default places hold everyone's first experiments: every user reads them (not what is in
# them, which each reader sees filtered to their own).
_DEFAULT_IDS = {"workspace": DEFAULT_WORKSPACE_ID, "project": DEFAULT_PROJECT_ID}


def check_read_access(value: str, where: str = "read_access") -> str:
    """`value` if it is a read access setting; ValueError naming `where` otherwise."""
    if value not in READ_ACCESS:
        raise ValueError(f"{where}: expected 'all' or 'own', got {value!r}")
    return value


def restricted_reader(read_access: str, principal: Any) -> UserPrincipal | None:
    """The user whose reads are narrowed to their own objects, or None for one who reads
    everything (read_access "all", an admin, the owner account, a trial token, nobody)."""
    if read_access != "own" or not isinstance(principal, UserPrincipal) or principal.admin:
        return None
    return principal


def may_read(reader: UserPrincipal, kind: str, owner_id: Any, object_id: Any = None) -> bool:
    """Whether `reader` may read an object of `kind` owned by `owner_id` (`object_id`: its
    id, for the default workspace and project, which everyone reads)."""
    if kind in _DEFAULT_IDS and object_id == _DEFAULT_IDS[kind]:
        return True
    return owner_id is not None and owner_id == reader.user_id


def not_found(kind: str, key: Any) -> errors.NotFound:
    """The answer for an object `reader` may not read: the same as for none at all."""
    shown = repr(str(key)) if kind == "model" else str(key)
    return errors.NotFound(f"{kind} {shown} not found")


def check_may_read(users: Any, reader: UserPrincipal, kind: str, key: Any) -> None:
    """NotFound unless `reader` may read the object (`kind` as for `Users.owner_of`)."""
    if kind in _DEFAULT_IDS and _as_int(key) == _DEFAULT_IDS[kind]:
        return
    try:
        owner_id = users.owner_of(kind, key)
    except errors.NotFound:
        raise not_found(kind, key) from None
    if not may_read(reader, kind, owner_id):
        raise not_found(kind, key)


def _as_int(key: Any) -> int | None:
    try:
        return int(key)
    except (TypeError, ValueError):
        return None


__all__ = ["READ_ACCESS", "check_may_read", "check_read_access", "may_read", "restricted_reader"]
