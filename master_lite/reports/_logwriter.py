"""One background thread that writes captured log lines to the store in batches.

Reader threads of every run hand their lines here, so the store sees one writer connection
for all captured output (not one per run) and big bursts become few transactions. A callback
queued with `after_pending` runs only once every line queued before it is stored — the master
uses it so a trial's exit is processed after its last log lines.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

BATCH_LINES = 2000


class LogWriter:
    def __init__(self, write: Callable[[list], None]) -> None:
        self._write = write
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self._thread.start()

    def submit(self, records: list) -> None:
        """Called from any thread with a list of log records."""
        self._queue.put(("lines", records))

    def after_pending(self, callback: Callable[[], None]) -> None:
        self._queue.put(("call", callback))

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(("stop", None))
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            kind, item = self._queue.get()
            batch: list = []
            while kind == "lines":
                batch.extend(item)
                if len(batch) >= BATCH_LINES:
                    break
                try:
                    kind, item = self._queue.get_nowait()
                except queue.Empty:
                    kind, item = "idle", None
            if batch:
                self._safely(self._write, batch)
            if kind == "lines":  # the batch was full: `item` is already in it
                continue
            if kind == "call":
                self._safely(item)
            elif kind == "stop":
                return

    @staticmethod
    def _safely(function: Callable, *args: object) -> None:
        try:
            function(*args)
        except Exception:  # a failed write must not stop capture for every other trial
            pass
