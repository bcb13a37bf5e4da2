"""Removing directories without blocking the event loop: a rename now, the removal later.

Deleting an experiment or a checkpoint used to `rmtree` on the loop: a checkpoint of many files
or a trial dir with a large context held every request (issue 26: the loop never blocks). The
loop now only renames the directory to a hidden sibling (one syscall on the same filesystem, so
the name is free again at once: SQLite reuses a deleted trial's id, whose work dir must not be
removed later under a new trial) and a worker thread removes it. A master that dies meanwhile
leaves `.det-trash-*` entries; `sweep` removes them at the next start.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import threading
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger("master_lite.trash")

TRASH_PREFIX = ".det-trash-"


def discard(path: Path) -> None:
    """Make `path` (a directory) disappear now and remove its files in the background.

    Raises:
        FileNotFoundError: there is nothing at `path`.
        OSError: it could not be renamed (permissions, a read-only filesystem): nothing
            changed, as when a removal fails.
    """
    target = path.parent / f"{TRASH_PREFIX}{path.name}-{secrets.token_hex(4)}"
    os.rename(path, target)
    threading.Thread(target=_remove, args=(target,), name="trash", daemon=True).start()


def sweep(directories: Iterable[Path]) -> None:
    """Remove, in the background, what an earlier master left in `directories`' trash."""
    leftovers = []
    for directory in directories:
        try:
            leftovers += [p for p in directory.iterdir() if p.name.startswith(TRASH_PREFIX)]
        except OSError:
            continue  # absent or unreadable: nothing of ours there
    if leftovers:
        threading.Thread(target=_remove_all, args=(leftovers,), name="trash", daemon=True).start()


def _remove_all(paths: list[Path]) -> None:
    for path in paths:
        _remove(path)


def _remove(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:  # left for the next start's sweep
        logger.warning("could not remove %s: %s", path, exc)


__all__ = ["TRASH_PREFIX", "discard", "sweep"]
