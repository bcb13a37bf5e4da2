"""How the processes of one node read a checkpoint that is not a local directory (s3): local
rank 0 lists and downloads once, for every process of the node, what any of them wants.

Helpers of `CheckpointContext.restore_path`/`download`; every function is a synchronization
point of the node's processes (each of them must call it)."""

from __future__ import annotations

import contextlib
import pathlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from determined.common import storage

Selector = Callable[[str], bool]


def local_listing(dist: Any, manager: Any, storage_id: str) -> list[str]:
    """The checkpoint's paths, listed by local rank 0 for the node's processes; every one of
    them raises CheckpointNotFound (or the store's StorageError) if listing failed."""
    from determined.errors import CheckpointNotFound

    answer: Any = None
    if dist.local_rank == 0:
        try:
            answer = ("ok", list(manager.resources(storage_id)))
        except CheckpointNotFound as exc:
            answer = ("missing", str(exc))
        except Exception as exc:  # the store's: every process reports it, none waits forever
            answer = ("error", str(exc))
    kind, value = dist.broadcast_local(answer)
    if kind == "missing":
        raise CheckpointNotFound(value)
    if kind == "error":
        raise storage.StorageError(value)
    return list(value)


def wanted_paths(dist: Any, listing: list[str], selector: Selector | None) -> list[str]:
    """What any of the node's processes wants of `listing` (all of it if one has no selector)."""
    wanted = None if selector is None else [p for p in listing if selector(p)]
    wanted_by_all = dist.allgather_local(wanted)
    if any(w is None for w in wanted_by_all):
        return listing
    return sorted(set().union(*wanted_by_all))


@contextlib.contextmanager
def shared_restore(
    dist: Any, manager: Any, storage_id: str, selector: Selector | None
) -> Iterator[pathlib.Path]:
    """The checkpoint downloaded once per node (by local rank 0) into a scratch directory the
    node's processes share; removed once every one of them is done with it."""
    paths = wanted_paths(dist, local_listing(dist, manager, storage_id), selector)
    scratch: pathlib.Path | None = None
    outcome: Any = None
    if dist.local_rank == 0:
        scratch = pathlib.Path(tempfile.mkdtemp(prefix=f"{storage_id}-"))
        try:
            manager.download(storage_id, scratch, set(paths).__contains__)
            outcome = ("ok", str(scratch))
        except Exception as exc:
            outcome = ("error", str(exc))
    kind, value = dist.broadcast_local(outcome)
    try:
        if kind == "error":
            raise storage.StorageError(value)
        yield pathlib.Path(value)
    finally:
        dist.allgather_local(None)  # nobody reads it any more
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


__all__ = ["local_listing", "shared_restore", "wanted_paths"]
