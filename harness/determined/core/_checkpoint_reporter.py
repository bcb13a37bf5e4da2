"""`CheckpointReporter`: the background thread that POSTs checkpoint records to the master.

`CheckpointContext` writes a checkpoint's files and hands its record here, so that the training
loop does not wait for the round trip (bench/bench_harness_overhead.py).
"""

from __future__ import annotations

import atexit
import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from determined.core import _spool
from determined.core._spool import is_retriable, retry_delays

logger = logging.getLogger("determined.core")

_DRAIN_LOG_INTERVAL_S = 10.0


def report_failed(storage_id: str, error: Any) -> RuntimeError:
    """The error a failed `POST /checkpoints` is raised as, in the thread that saved it."""
    return RuntimeError(
        f"reporting checkpoint {storage_id} to the master failed: {error}; its files are in "
        "checkpoint storage but the master does not list it (save a new checkpoint)"
    )


class CheckpointReporter:
    """POSTs checkpoint records to the master from a background thread, in order.

    The caller's thread only enqueues (the files are already in storage, so a reported checkpoint
    always exists). `session_factory()` makes the thread's own `Session` (requests sessions are
    not thread-safe). A failed POST is raised in the caller's thread by its next `submit`,
    `flush` or `close`. `flush()` waits until everything submitted has been posted; `close()`
    flushes and stops the thread; at interpreter exit whatever is queued is still posted.
    Records are posted one at a time, in order: checkpoints are rare, so there is nothing to batch.
    An unreachable master (a restart) is retried with backoff for `retry_window_s` (default
    `_spool.DEFAULT_RETRY_WINDOW_S`; a record posted again after a lost answer is stored once:
    the same trial's record is idempotent).
    """

    def __init__(
        self, session_factory: Callable[[], Any], *, retry_window_s: float | None = None
    ) -> None:
        self._session_factory = session_factory
        self._retry_window_s = (
            _spool.DEFAULT_RETRY_WINDOW_S if retry_window_s is None else retry_window_s
        )
        self._pending: collections.deque = collections.deque()
        self._unfinished = 0  # submitted, not yet posted (or failed)
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._error: tuple[str, BaseException] | None = None
        self._closed = False

    def submit(self, storage_id: str, payload: bytes) -> None:
        """Queue one record (JSON, encoded by the caller: what it reports may not change later),
        then raise a failure of an earlier record (this record is still posted; its own failure
        surfaces at the next call)."""
        with self._changed:
            if self._closed:
                raise RuntimeError(
                    f"checkpoint {storage_id} was saved after core.Context was closed, so it "
                    "cannot be reported; save checkpoints inside `with det.core.init()`"
                )
            # Taken before this record is queued: the thread may post (and fail) it before this
            # call returns, and whether that failure surfaced here or at the next call must not
            # depend on the timing.
            earlier, self._error = self._error, None
            self._pending.append((storage_id, payload))
            self._unfinished += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="CheckpointReporterThread", daemon=True
                )
                self._thread.start()
                # Daemon threads still run during atexit: a script that ends right after its
                # last checkpoint (or never closes the context) still reports it.
                atexit.register(self._drain_at_exit)
            self._changed.notify_all()
        if earlier is not None:
            storage_id, error = earlier
            raise report_failed(storage_id, error) from error

    def flush(self) -> None:
        """Wait until every submitted record reached the master; raise a failure."""
        with self._changed:
            started = time.monotonic()
            while self._unfinished:
                if not self._changed.wait(timeout=_DRAIN_LOG_INTERVAL_S) and self._unfinished:
                    logger.info(
                        "waiting for %d checkpoint report(s) to reach the master (%.0f s so far)",
                        self._unfinished,
                        time.monotonic() - started,
                    )
        self.raise_error()

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            with self._changed:
                self._closed = True
                self._changed.notify_all()
                thread = self._thread
            if thread is not None:
                thread.join()
                atexit.unregister(self._drain_at_exit)

    def _drain_at_exit(self) -> None:
        try:
            self.close()
        except Exception as e:  # noqa: BLE001 - nobody is left to raise to at exit
            logger.error("%s", e)

    def raise_error(self) -> None:
        """Raise (once) the first failure of a record posted since the last call."""
        with self._changed:
            failure, self._error = self._error, None
        if failure is None:
            return
        storage_id, error = failure
        raise report_failed(storage_id, error) from error

    def _run(self) -> None:
        session = None
        try:
            while True:
                with self._changed:
                    while not self._pending and not self._closed:
                        self._changed.wait()
                    if not self._pending:
                        return
                    storage_id, payload = self._pending.popleft()
                failure = None
                try:
                    if session is None:
                        session = self._session_factory()
                    self._post(session, storage_id, payload)
                    logger.info("reported checkpoint %s to the master", storage_id)
                except BaseException as e:  # noqa: BLE001 - every failure must reach the caller
                    logger.warning(
                        "reporting checkpoint %s to the master failed: %s", storage_id, e
                    )
                    failure = (storage_id, e)
                with self._changed:
                    if failure is not None and self._error is None:
                        self._error = failure
                    self._unfinished -= 1
                    self._changed.notify_all()
        finally:
            if session is not None and hasattr(session, "close"):
                session.close()

    def _post(self, session: Any, storage_id: str, payload: bytes) -> None:
        """POST one record, riding out an unreachable master for the retry window."""
        started = time.monotonic()
        delays = retry_delays()
        warned = False
        while True:
            try:
                session.request(
                    "POST",
                    "/checkpoints",
                    data=payload,
                    headers={"Content-Type": "application/json"},
                )
                return
            except Exception as e:
                waited = time.monotonic() - started
                if not is_retriable(e) or waited >= self._retry_window_s:
                    raise
                if not warned:
                    warned = True
                    logger.warning(
                        "reporting checkpoint %s: the master is unreachable (%s); retrying "
                        "for %.0f s",
                        storage_id,
                        e,
                        self._retry_window_s,
                    )
                time.sleep(min(next(delays), self._retry_window_s - waited))
