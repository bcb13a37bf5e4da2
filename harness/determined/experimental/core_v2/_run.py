"""One unmanaged run as the kernel sees it: its trial on the master, the lease it keeps alive,
and the lines its cells print, shipped as the trial's logs.

A background thread renews the lease (every third of it) and ships captured lines; if the master
says the trial ended (a user killed it, or the lease lapsed while the kernel was frozen), the
reason is kept and every later report raises it in the caller's thread.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from typing import Any, TextIO

from determined.common.api import Session
from determined.common.api.errors import APIError

logger = logging.getLogger("determined.core_v2")

DEFAULT_LEASE_SECONDS = 60.0
LOG_FLUSH_SECONDS = 0.5
MAX_LINES_PER_POST = 1000
# The master keeps at most 64 KiB of a line and reads at most 8 MiB per log POST (docs/rest-api.md,
# "Limits"): a longer line is cut here, marked, and a POST carries at most 1 Mi characters.
MAX_LINE_CHARS = 60_000
MAX_CHARS_PER_POST = 1024 * 1024


class RunEnded(RuntimeError):
    """The run cannot report any more: it was closed, or the master ended its trial."""


class _Tee:
    """A text stream that writes through to the kernel's own stream and keeps whole lines."""

    def __init__(self, inner: TextIO, stream: str, sink: _LineSink) -> None:
        self._inner = inner
        self._stream = stream
        self._sink = sink
        self._partial = ""
        self._lock = threading.Lock()  # threads print too (data loaders, loggers)

    def write(self, text: str) -> int:
        written = self._inner.write(text)
        with self._lock:
            self._partial += text
            if "\n" not in self._partial:
                return written
            *lines, self._partial = self._partial.split("\n")
        self._sink.add(self._stream, lines)
        return written

    def flush(self) -> None:
        self._inner.flush()

    def flush_partial(self) -> None:
        with self._lock:
            partial, self._partial = self._partial, ""
        if partial:
            self._sink.add(self._stream, [partial])

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ... of the real one
        return getattr(self._inner, name)


class _LineSink:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: list[dict] = []

    def add(self, stream: str, lines: list[str]) -> None:
        now = time.time()
        lines = [_capped(line) for line in lines]
        with self._lock:
            self._lines.extend({"stream": stream, "line": line, "time": now} for line in lines)

    def put_back(self, lines: list[dict]) -> None:
        """Lines taken but not delivered go first again."""
        with self._lock:
            self._lines[:0] = lines

    def take(self) -> list[dict]:
        """The next lines to ship: at most MAX_LINES_PER_POST, MAX_CHARS_PER_POST in all."""
        with self._lock:
            count = size = 0
            for item in self._lines[:MAX_LINES_PER_POST]:
                size += len(item["line"])
                if count and size > MAX_CHARS_PER_POST:
                    break
                count += 1
            taken, self._lines = self._lines[:count], self._lines[count:]
        return taken


def _capped(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return (
        f"{line[:MAX_LINE_CHARS]} [line truncated: {len(line)} characters, over the "
        f"{MAX_LINE_CHARS}-character limit of a log line]"
    )


class UnmanagedRun:
    """Opens (or resumes) the run's trial; `start()` keeps its lease and captures its output,
    `close(state)` ends it. `session` is the user's (the client's); reports use `trial_session`,
    whose token is this trial's alone."""

    def __init__(
        self,
        session: Session,
        body: dict,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        capture_output: bool = True,
        opened: dict | None = None,
    ) -> None:
        """`opened`: the master's answer to the chief's open of a distributed run: this
        process is another rank of that run (it reports with the run's token and ships its
        lines; the chief alone keeps the lease and closes the trial, as in Determined)."""
        self.chief = opened is None
        if opened is None:
            host = f"{socket.gethostname()} pid {os.getpid()}"
            answer = session.post(
                "/unmanaged/runs", {**body, "lease_seconds": lease_seconds, "host": host}
            )
        else:
            answer = opened
        self.answer: dict = answer
        self.trial_id: int = int(answer["trial_id"])
        self.experiment_id: int = int(answer["experiment_id"])
        self.trial_session = Session(session.master_url, answer["token"])
        # The keeper thread's own session: a requests session is not shared between threads.
        self._keeper_session = Session(session.master_url, answer["token"])
        self.lease_seconds = float(answer.get("lease_seconds") or lease_seconds)
        self._capture_output = capture_output
        self._sink = _LineSink()
        self._tees: list[tuple[str, _Tee]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ended: str | None = None  # why reports are refused, once they are
        self.closed = False

    # -- the run's life -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the lease keeper and the output capture."""
        if self._capture_output:
            for name in ("stdout", "stderr"):
                tee = _Tee(getattr(sys, name), name, self._sink)
                setattr(sys, name, tee)
                self._tees.append((name, tee))
        self._thread = threading.Thread(
            target=self._keep, name=f"core_v2-trial-{self.trial_id}", daemon=True
        )
        self._thread.start()

    def check_open(self) -> None:
        """Raise `RunEnded` (saying why and what to do) once the run can no longer report."""
        if self._ended is not None:
            raise RunEnded(self._ended)

    def close(self, state: str = "COMPLETED", message: str | None = None) -> None:
        """Ship the last lines, end the trial as `state` and stop; idempotent."""
        if self.closed:
            return
        self.closed = True
        self._restore_streams()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._ship_logs()
        if self._ended is None and self.chief:
            try:
                self._keeper_session.post(
                    f"/unmanaged/trials/{self.trial_id}/close",
                    {"state": state, "message": message},
                )
            except APIError as exc:
                logger.warning("closing trial %s: %s", self.trial_id, exc)
        self._ended = (
            f"core_v2: the run of trial {self.trial_id} was closed (core_v2.close()); "
            "call core_v2.init(...) again, with the same external ids to resume this trial"
        )
        self.trial_session.close()
        self._keeper_session.close()

    def _restore_streams(self) -> None:
        for name, tee in reversed(self._tees):
            tee.flush_partial()
            if getattr(sys, name) is tee:  # someone may have replaced it after us
                setattr(sys, name, tee._inner)
        self._tees = []

    # -- the keeper thread --------------------------------------------------------------------
    def _keep(self) -> None:
        renew_every = self.lease_seconds / 3
        next_renewal = time.monotonic() + renew_every
        while not self._stop.wait(LOG_FLUSH_SECONDS):
            self._ship_logs()
            if time.monotonic() >= next_renewal and self._ended is None and self.chief:
                # A failed renewal (a restarting master) is tried again at the next tick, not
                # a third of the lease later: the master may be back with little lease left.
                renewed = self._renew()
                next_renewal = time.monotonic() + (renew_every if renewed else 0)

    def post_bytes(self, path: str, body: bytes) -> None:
        """POST a pre-encoded JSON body with the trial's token (resent reports)."""
        self.trial_session.request(
            "POST", path, data=body, headers={"Content-Type": "application/json"}
        )

    def _renew(self) -> bool:
        """Renew the lease; False when the master could not be reached."""
        try:
            self._keeper_session.post(f"/unmanaged/trials/{self.trial_id}/heartbeat", {})
            return True
        except APIError as exc:
            if exc.status in (401, 404, 409):
                self._ended = (
                    f"core_v2: the master ended trial {self.trial_id} ({exc}); nothing more is "
                    "stored for this run: call core_v2.init(...) with the same external ids "
                    "to resume it"
                )
            else:  # a master restarting: the next renewal tries again, within the lease
                logger.warning("renewing the lease of trial %s: %s", self.trial_id, exc)
            return exc.status not in (0, 502, 503, 504, 599)
        except Exception as exc:  # unreachable master: same, the lease leaves some slack
            logger.warning("renewing the lease of trial %s: %s", self.trial_id, exc)
            return False

    def _ship_logs(self) -> None:
        if self._ended is not None:
            return
        while True:
            lines = self._sink.take()
            if not lines:
                return
            try:
                self._keeper_session.post(
                    f"/unmanaged/trials/{self.trial_id}/logs", {"logs": lines}
                )
            except Exception as exc:  # the lines wait for the next try (a restarting master)
                logger.debug(
                    "shipping %d log lines of trial %s: %s", len(lines), self.trial_id, exc
                )
                if getattr(exc, "status", 0) in (0, 502, 503, 504, 599):
                    self._sink.put_back(lines)
                return


__all__ = ["DEFAULT_LEASE_SECONDS", "RunEnded", "UnmanagedRun"]
