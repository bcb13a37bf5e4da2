"""Partial checkpoint directories: collected, never left to fill the disk (issue 26, row 16).

A trial that dies while saving (killed, out of disk, its node lost) leaves a uuid-named
directory in checkpoint storage that no report ever named: the master never registered it, so
neither the checkpoint GC nor a user's deletion would ever remove it. `PartialCheckpoints`
deletes such directories when the master starts and whenever a trial's run ends.

What it deletes, all of it required:

* a directory directly inside a checkpoint storage directory of this master (a storage root, or
  an experiment's `checkpoint_storage` base that resolves under one), not a symlink;
* whose name is a checkpoint uuid (so `.det-trials`, `tensorboard` and anything a user put
  there that is not uuid-named are never touched);
* that no checkpoint record names, except a DELETED one (whose files are garbage by definition:
  e.g. what a container trial deleted from its own view, see runners/container/_storage.py);
* where nothing in the tree changed for `grace` seconds (the newest mtime of the directory and
  everything under it). A save in progress keeps writing, so it is never touched; which trial
  wrote an unregistered directory is unknown (no report names it), so age is the only sound
  test, and a grace of an hour is far beyond the time between a save's last write and its
  report (the harness reports right after writing; a master that is down delays the report by
  at most the run's lease).

The deletion runs off the event loop, with a log line naming each directory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from determined.common.states import TERMINAL_TRIAL_STATES
from master_lite._core import _trash
from master_lite._core._shared import MasterState
from master_lite.checkpoints._confinement import is_checkpoint_uuid
from master_lite.runners.container import VIEWS_DIR, view_prefix

logger = logging.getLogger("master_lite")

#: How long a unregistered uuid-named directory must be unchanged before it is collected.
PARTIAL_GRACE_SECONDS = 3600.0


def _newest_mtime(path: str, cutoff: float) -> float:
    """The newest mtime of `path` and everything under it (symlinks not followed); stops as
    soon as one is newer than `cutoff`."""
    newest = os.lstat(path).st_mtime
    for directory, dirnames, filenames in os.walk(path, followlinks=False):
        for name in (*dirnames, *filenames):
            try:
                newest = max(newest, os.lstat(os.path.join(directory, name)).st_mtime)
            except FileNotFoundError:
                continue  # removed meanwhile: changing, so `newest` of its dir says so
            if newest > cutoff:
                return newest
    return newest


def sweep_partials(
    bases: Iterable[Path], live: set[str], *, grace: float, now: float | None = None
) -> list[Path]:
    """Delete the partial checkpoint directories directly inside `bases` (see the module doc);
    returns those deleted. Blocking: call it off the event loop."""
    cutoff = (time.time() if now is None else now) - grace
    deleted = []
    for base in bases:
        try:
            entries = list(os.scandir(base))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            logger.warning("partial checkpoints: cannot list %s: %s", base, exc)
            continue
        for entry in entries:
            if not is_checkpoint_uuid(entry.name) or entry.name in live:
                continue
            try:
                if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                    continue
                if _newest_mtime(entry.path, cutoff) > cutoff:
                    continue  # written recently: a save may be in progress
                shutil.rmtree(entry.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                logger.warning("partial checkpoints: could not delete %s: %s", entry.path, exc)
                continue
            logger.info(
                "partial checkpoints: deleted %s (uuid-named, no checkpoint record names it, "
                "unchanged for over %d s: a save that never finished)",
                entry.path,
                int(grace),
            )
            deleted.append(Path(entry.path))
    return deleted


def _views_of(bases: Iterable[Path], prefix: str) -> list[tuple[Path, int]]:
    """(path, trial id) of this master's container trial views in `bases`."""
    found = []
    for base in bases:
        try:
            entries = list(os.scandir(base / VIEWS_DIR))
        except OSError:
            continue
        for entry in entries:
            number = entry.name.removeprefix(prefix)
            if entry.name.startswith(prefix) and number.isdigit() and not entry.is_symlink():
                found.append((Path(entry.path), int(number)))
    return found


def _remove_views(paths: list[Path]) -> list[Path]:
    removed = []
    for path in paths:
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("partial checkpoints: could not remove the view %s: %s", path, exc)
            continue
        logger.info("partial checkpoints: removed %s (the storage view of a finished trial)", path)
        removed.append(path)
    return removed


class PartialCheckpoints:
    """Collects partial checkpoint directories in the master's checkpoint storage."""

    def __init__(self, shared: MasterState, *, grace: float = PARTIAL_GRACE_SECONDS) -> None:
        self._shared = shared
        self.grace = grace
        self._tasks: set[asyncio.Task] = set()

    def _bases(self, experiment_id: int | None) -> list[Path]:
        """The storage directories to look in: every storage root, and the checkpoint base of
        the experiment (of every experiment when None) where it resolves under a root."""
        from determined.common import storage

        roots = self._shared.storage_roots
        store = self._shared.store
        if experiment_id is None:
            experiments = store.experiments.matching()
        else:
            row = store.experiments.get(experiment_id)
            experiments = [] if row is None else [row]
        bases = list(roots)
        for experiment in experiments:
            try:
                base = storage.checkpoint_base(experiment.config.get("checkpoint_storage") or {})
                resolved = base.resolve()
            except (ValueError, OSError):
                continue
            under = any(resolved == r or resolved.is_relative_to(r) for r in roots)
            if under and resolved not in bases:
                bases.append(resolved)
        return bases

    async def collect(self, experiment_id: int | None = None) -> list[Path]:
        """Delete the partial checkpoint directories of the storage roots and of the
        experiment's storage (every experiment's when None), and the storage views of its
        finished container trials; returns what was deleted."""
        if self._shared.closed:
            return []
        bases = self._bases(experiment_id)
        live = self._shared.store.checkpoints.live_uuids()
        if experiment_id is None:  # the master's start: what a previous master left to remove
            trash = [self._shared.root_dir / "trials"]
            trash += [b for base in bases for b in (base, base / "tensorboard" / "experiment")]
            await asyncio.to_thread(_trash.sweep, trash)
        deleted = await asyncio.to_thread(sweep_partials, bases, live, grace=self.grace)
        return deleted + await self._remove_finished_views(bases)

    async def _remove_finished_views(self, bases: list[Path]) -> list[Path]:
        """A finished trial's view of the storage (runners/container/_storage.py) goes: its
        hard links would keep the space of checkpoints the GC deletes."""
        prefix = view_prefix(str(Path(self._shared.root_dir).absolute()))
        views = await asyncio.to_thread(_views_of, bases, prefix)
        if self._shared.closed:
            return []
        finished = []
        for path, trial_id in views:
            trial = self._shared.store.trials.get(trial_id)
            if trial is None or trial.state in TERMINAL_TRIAL_STATES:
                finished.append(path)
        return await asyncio.to_thread(_remove_views, finished)

    def request(self, experiment_id: int | None = None) -> None:
        """`collect` in the background (from a run's end or the master's start)."""

        async def run() -> None:
            try:
                await self.collect(experiment_id)
            except Exception:  # storage trouble must not reach the loop's handler
                logger.exception("partial checkpoint collection failed")

        task = self._shared.loop.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


__all__ = ["PARTIAL_GRACE_SECONDS", "PartialCheckpoints", "sweep_partials"]
