"""What every part of the master shares: the store, the event bus, the loop, one transaction.

Only infrastructure lives here, and the handles of the one writer of trial and experiment
state (`trial_states`, `experiment_states`: _states.py). Other mutable domain state
(allocations, searchers, grace timers) is owned by exactly one part each; see docs/internals.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from master_lite._core._events import EventBus
from master_lite._core._states import ExperimentStates, TrialStates
from master_lite.store import Store


def searcher_module() -> Any:
    """The `master_lite.searcher` package, imported on first use.

    Imported late: the searchers are a separate package and unused until an experiment runs."""
    return importlib.import_module("master_lite.searcher")


class MasterState:
    """The store, event bus and loop of one master, and its transaction and change signals.

    `store` and `loop` exist once the master started (`open`); before, they are None."""

    def __init__(self, root_dir: Path, events: EventBus) -> None:
        self.root_dir = root_dir
        self.events = events
        # Where checkpoint storage may lie (resolved; master_lite.checkpoints._confinement):
        # the master's own <root_dir>/checkpoints unless the facade is given more. Set once.
        self.storage_roots: tuple[Path, ...] = ((root_dir / "checkpoints").resolve(),)
        # What trials' code must not read (`LaunchSpec.hidden`; the process runner's sandbox
        # hides it): the user token's directory, the store, other experiments' TensorBoard
        # logs. The hosted master adds Jupyter's runtime dir (its token, kernels' keys).
        self.hidden_from_trials: tuple[Path, ...] = tuple(
            root_dir / name
            for name in (
                "private",
                "master.db",
                "master.db-wal",
                "master.db-shm",
                "master.db-journal",
                "tensorboards",
            )
        )
        self.store: Store = None  # type: ignore[assignment]  # opened by the master's start()
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        # Set while the master stops (no new launches) and once it stopped (nothing runs).
        self.stopping = False
        self.closed = True
        self._atomic_depth = 0
        self._after_commit: list[Callable[[], None]] = []
        self._changed: dict[tuple, asyncio.Event] = {}
        # The one writer of trial and experiment state (_states.py): every part changes a
        # state through these named transitions.
        self.trial_states = TrialStates(lambda: self.store)
        self.experiment_states = ExperimentStates(lambda: self.store)

    def open(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        """Start serving over `store` on `loop`."""
        self.store = store
        self.loop = loop
        self.closed = False
        self.stopping = False

    # -- atomic state changes -----------------------------------------------------------------
    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """One store transaction around a state change and everything it causes (searcher
        events, its snapshot, trial states), so a master killed at any instant leaves the store
        before or after the change, never half-way. Side effects the store cannot roll back
        (launching processes) wait in `after_commit` until the outermost transaction committed."""
        self._atomic_depth += 1
        try:
            with self.store.transaction():
                yield
        finally:
            self._atomic_depth -= 1
        if self._atomic_depth == 0 and self._after_commit:
            # A deferred callback that was pending when a transaction failed stays pending
            # until the next one commits (it is retried then, not lost).
            pending, self._after_commit = self._after_commit, []
            for callback in pending:
                callback()

    @property
    def in_atomic(self) -> bool:
        """Whether a transaction of `atomic()` is open."""
        return self._atomic_depth > 0

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the outermost `atomic()` commits (once, however often asked)."""
        if callback not in self._after_commit:
            self._after_commit.append(callback)

    # -- change notification for long polls ---------------------------------------------------
    def notify(self, key: tuple) -> None:
        """Wake whoever waits in `wait_changed(key)`."""
        event = self._changed.pop(key, None)
        if event is not None:
            event.set()

    async def wait_changed(self, key: tuple, timeout: float) -> None:
        """Return when `notify(key)` was called, or after `timeout` seconds."""
        event = self._changed.setdefault(key, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), max(timeout, 0))
        except asyncio.TimeoutError:
            pass


__all__ = ["MasterState", "searcher_module"]
