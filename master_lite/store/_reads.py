"""The read pool: reads of the store in worker threads, each on its own read-only connection.

The event loop thread keeps the one writer connection (writes stay in the order the loop makes
them). A read handed to the pool runs in a worker thread whose connection has
`PRAGMA query_only` on, inside one deferred read transaction: in WAL mode it reads the snapshot
of every transaction committed when its first statement ran, so

* reads proceed beside each other and beside the writer (none waits for another's lock), and
* a read started after a write was acknowledged (its transaction committed before the answer
  went out) sees that write, and every query of one read sees the same snapshot.

SQLite releases the GIL while it steps a statement, so reads whose work is mostly SQL (the API's
JSON is largely built inside SQLite, see _queries.py) run in parallel on several cores.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from master_lite.errors import MASTER_STOPPING_MESSAGE, MasterStopping

if TYPE_CHECKING:
    from ._database import Database

T = TypeVar("T")

DEFAULT_READERS = 4


class ReadPool:
    """Worker threads that run reads of `database`, each on its own read-only connection.

    `submit(fn, *args)` runs `fn(*args)` in a worker inside one read transaction and returns a
    `concurrent.futures.Future` (the master awaits it with `asyncio.wrap_future`). `fn` reads
    through the store as usual (the store hands each thread its own connection); a write from
    it fails with "attempt to write a readonly database"."""

    def __init__(self, database: Database, readers: int = DEFAULT_READERS) -> None:
        if readers < 1:
            raise ValueError(f"readers: expected at least 1 reader thread, got {readers}")
        self._database = database
        self._readers = readers
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._closed:
                raise MasterStopping(MASTER_STOPPING_MESSAGE)  # a 503, as the writer's
            if self._executor is None:  # threads start with the first read
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._readers,
                    thread_name_prefix="store-read",
                    initializer=self._database.mark_reader_thread,
                )
            return self._executor

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        """Run `fn(*args, **kwargs)` in a reader thread, in one read transaction."""
        return self._pool().submit(self._run, fn, args, kwargs)

    def _run(self, fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
        with self._database.read_transaction():
            return fn(*args, **kwargs)

    def close(self) -> None:
        """Wait for the reads under way, refuse new ones (their connections close with the
        store's)."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


__all__ = ["DEFAULT_READERS", "ReadPool"]
