"""A trial's reports (metrics, progress, checkpoint records) posted by a child process.

Why a process: POSTing from a thread of the trial process costs the training loop more than the
POST itself. Each POST's Python work (encoding, HTTP, parsing the answer) needs the GIL several
times; each time, the training thread is stopped for it and then waits to get the GIL back.
bench/bench_harness_overhead.py measured 2-5 % of a small torch model's training time lost that
way at one report per 10 batches. Here the training thread queues each report, and at most once
per coalescing interval (`SHIP_INTERVAL_S`) encodes the queue into one frame and writes it to a
pipe. A stdlib-only child (`_courier_child.py`) posts each frame from its own interpreter, on
another core. Reports of any group but training (the searcher may wait on a validation),
progress and checkpoint records are written at once; a tail thread writes queued training
reports that no later report call did within one interval.

Guarantees, as the thread-based `MetricsShipper`/`CheckpointReporter` give them:
* reports and checkpoint records reach the master in the order they were made;
* a failed POST is raised in the caller's thread by its next report (metrics) or checkpoint
  call, or by `close()`;
* `flush()` returns once everything written before it is stored;
* `close()` and interpreter exit post everything reported; after a crash of the trial (the child
  reads the end of the pipe), everything handed to the child is still posted: all but the
  training reports of the last coalescing interval.
The pipe is the queue: when the master falls behind and 1 MiB of reports is waiting, a report
call waits, as `MetricsShipper` waits when its queue is full.
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import pathlib
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

from determined.core import _spool
from determined.core._checkpoint_reporter import report_failed
from determined.core._metrics import SHIP_INTERVAL_S, _iso, _json_default

logger = logging.getLogger("determined.core")

_HEADER = struct.Struct(">cI")
_CHILD = pathlib.Path(__file__).with_name("_courier_child.py")
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # Linux fcntl; elsewhere the default pipe size applies
_DRAIN_LOG_INTERVAL_S = 10.0
# DET_REPORT_COURIER=0 turns the courier off: reports go from threads of the trial process.
ENV_SWITCH = "DET_REPORT_COURIER"


def courier_usable(master_url: str) -> bool:
    """The courier speaks plain HTTP(S) straight to the master: not through a proxy the
    environment names for it (requests, the threads' client, honours those)."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return False
    if not master_url.startswith(("http://", "https://")):
        return False
    import urllib.parse  # here, not at import: `import determined` stays light
    import urllib.request

    host = urllib.parse.urlparse(master_url).hostname or ""
    proxies = urllib.request.getproxies()
    scheme = master_url.split(":", 1)[0]
    return not proxies.get(scheme) or bool(urllib.request.proxy_bypass(host))


_JSON_SCALARS = (float, int, str, bool, type(None))


def _check_json_scalars(metrics: dict) -> None:
    """Convert numpy/torch scalars in place (the dict is the reporter's own copy) and reject
    what JSON cannot hold, at the report call, which encoding later would not name."""
    for key, value in metrics.items():
        if not isinstance(value, _JSON_SCALARS) and not isinstance(value, (list, tuple, dict)):
            metrics[key] = _json_default(value)


_spare_child: subprocess.Popen | None = None  # started ahead of need, see prestart_child
_spare_lock = threading.Lock()


def _start_child() -> subprocess.Popen:
    import subprocess

    # -I -S: the child needs only the standard library; no site-packages, no PYTHON* settings.
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(_CHILD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        close_fds=True,
    )


def prestart_child() -> None:
    """Start a courier child now, for the first `ReportCourier` of this process to use.

    Pre-started trial interpreters (`determined.exec.prestarted`) call this while they wait for
    a trial, so the child's own start-up (~40 ms: an interpreter and `http.client`) is not
    between the trial's first report and the master. An unused child ends when this process
    does (it reads the end of its input and exits)."""
    global _spare_child
    with _spare_lock:
        if _spare_child is None:
            _spare_child = _start_child()


def _take_child() -> subprocess.Popen:
    global _spare_child
    with _spare_lock:
        child, _spare_child = _spare_child, None
    if child is None or child.poll() is not None:
        child = _start_child()
    return child


class CourierGone(RuntimeError):
    """The child process ended before it was asked to."""


class ReportCourier:
    """The parent's end: `put` (the `MetricsShipper` interface), `submit_checkpoint`, `flush`,
    `close`. The child starts with the first report or checkpoint.

    `on_delivered(n)`, if given, is called (in a reader thread) each time the master stored
    metric reports, with how many it has stored in all; it exists for latency measurements.
    An unreachable master is retried for `retry_window_s` (default
    `_spool.DEFAULT_RETRY_WINDOW_S`) and at least `connect_retries` times.
    """

    def __init__(
        self,
        master_url: str,
        token: str | None,
        trial_id: int,
        trial_run_id: int,
        *,
        timeout: float = 60.0,
        connect_retries: int = 5,
        on_delivered: Callable[[int], None] | None = None,
        retry_window_s: float | None = None,
    ) -> None:
        self._config = {
            "master_url": master_url.rstrip("/"),
            "token": token,
            "trial_id": trial_id,
            "timeout_s": timeout,
            "connect_retries": connect_retries,
            # A restarting master is retried this long (docs/fault-tolerance.md).
            "retry_window_s": (
                _spool.DEFAULT_RETRY_WINDOW_S if retry_window_s is None else retry_window_s
            ),
            "report_deliveries": on_delivered is not None,
        }
        self._trial_run_id = trial_run_id
        self._on_delivered = on_delivered
        self._interval = SHIP_INTERVAL_S
        self._pending: collections.deque = collections.deque()  # reports not yet written
        self._last_send = 0.0
        self._proc: subprocess.Popen | None = None
        self._fd = -1  # the pipe to the child (its stdin)
        self._write_lock = threading.Lock()
        self._answers = threading.Condition()
        self._flushed = 0  # the last flush marker answered
        self._flushes = 0  # the last flush marker written
        self._reader: threading.Thread | None = None
        self._gone = False  # the child's answers ended
        self._metrics_error: str | None = None
        self._checkpoint_error: tuple[str, str] | None = None
        self._closed = False

    # --- the MetricsShipper interface ---------------------------------------------------------
    def start(self) -> None:
        """Nothing to do yet: the child starts when there is something to post (a rank that
        never reports never starts one)."""

    def put(self, item: tuple) -> None:
        """Queue one report (called in the training thread: must stay cheap).

        Reports are encoded and written to the child in batches: by the training thread when
        the last batch is older than the coalescing interval, at once for anything but training
        reports (the searcher may wait on a validation), and otherwise by the tail thread, so a
        report followed by a long pause still leaves within about one interval.
        """
        if self._metrics_error is not None:
            self._raise_metrics_error()
        if self._closed:
            raise RuntimeError("metrics were reported after core.Context was closed")
        if item[0] != "__progress__":
            _check_json_scalars(item[2])
        self._pending.append(item)
        if item[0] != "training" or time.monotonic() - self._last_send >= self._interval:
            self._send_pending()

    def _send_pending(self) -> None:
        """Encode what is queued into one frame of reports (and one of progress) and write them."""
        with self._write_lock:
            pending = self._pending
            items = [pending.popleft() for _ in range(len(pending))]
            if not items:
                return
            self._last_send = time.monotonic()
            reports, progress = [], None
            for item in items:
                if item[0] == "__progress__":
                    progress = item[1]
                    continue
                group, steps_completed, metrics, batch_metrics, report_time = item
                report = {
                    "group": group,
                    "steps_completed": steps_completed,
                    "metrics": metrics,
                    "trial_run_id": self._trial_run_id,
                    "report_time": _iso(report_time),
                }
                if batch_metrics is not None:
                    report["batch_metrics"] = batch_metrics
                reports.append(report)
            if self._proc is None:
                self._spawn()
            if reports:
                try:
                    payload = json.dumps(reports, default=_json_default).encode()
                except (TypeError, ValueError) as e:
                    # Only inside batch_metrics or nested values (top-level ones were checked).
                    self._metrics_error = (
                        f"{len(reports)} metric report(s) could not be encoded: {e}"
                    )
                else:
                    self._write_frame(b"R", b"%d\n" % len(reports) + payload)
            if progress is not None:
                self._write_frame(b"P", json.dumps({"progress": progress, "is_raw": True}).encode())

    def close(self) -> None:
        """Post everything written, stop the child, and raise a metrics failure."""
        self.close_quietly()
        if self._metrics_error is not None:
            self._raise_metrics_error()

    def close_quietly(self) -> None:
        """`close()` without raising a metrics failure (the checkpoint side closes with this:
        metrics failures are the train context's to raise)."""
        if not self._closed:
            try:
                self._send_pending()
            finally:
                self._closed = True
                if self._proc is not None:
                    atexit.unregister(self._close_at_exit)
                    self._stop_child()

    # --- checkpoints --------------------------------------------------------------------------
    def submit_checkpoint(self, storage_id: str, payload: bytes) -> None:
        if self._closed:
            raise RuntimeError(
                f"checkpoint {storage_id} was saved after core.Context was closed, so it "
                "cannot be reported; save checkpoints inside `with det.core.init()`"
            )
        self._send_pending()  # reports made before this checkpoint go before it
        self._write(b"C", storage_id.encode() + b"\n" + payload)

    def flush(self) -> None:
        """Wait until everything written so far is posted (or failed)."""
        if self._closed:
            return
        self._send_pending()
        if self._proc is None:
            return
        with self._write_lock:
            self._flushes += 1
            marker = self._flushes
            self._write_frame(b"F", str(marker).encode())
        started = time.monotonic()
        with self._answers:
            while self._flushed < marker and not self._gone:
                if not self._answers.wait(_DRAIN_LOG_INTERVAL_S) and self._flushed < marker:
                    logger.info(
                        "waiting for queued reports to reach the master (%.0f s so far)",
                        time.monotonic() - started,
                    )
        if self._flushed < marker:
            raise CourierGone(self._gone_text())

    def take_checkpoint_error(self) -> tuple[str, str] | None:
        """The first checkpoint record that failed since the last call: (storage_id, message)."""
        with self._answers:
            failure, self._checkpoint_error = self._checkpoint_error, None
        return failure

    # --- the child ----------------------------------------------------------------------------
    def _write(self, kind: bytes, payload: bytes) -> None:
        with self._write_lock:
            if self._proc is None:
                self._spawn()
            self._write_frame(kind, payload)

    def _write_frame(self, kind: bytes, payload: bytes) -> None:
        data = memoryview(_HEADER.pack(kind, len(payload)) + payload)
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except BrokenPipeError:
            raise CourierGone(self._gone_text()) from None

    def _spawn(self) -> None:
        self._proc = _take_child()
        assert self._proc.stdin is not None
        self._fd = self._proc.stdin.fileno()
        try:
            import fcntl

            fcntl.fcntl(self._fd, _F_SETPIPE_SZ, _PIPE_SIZE)
        except (ImportError, OSError):
            pass  # a smaller pipe only means an earlier wait when the master falls behind
        self._reader = threading.Thread(
            target=self._read_answers, name="ReportCourierReader", daemon=True
        )
        self._reader.start()
        threading.Thread(target=self._send_tails, name="ReportCourierTail", daemon=True).start()
        # A script that never closes its context still gets its reports delivered.
        atexit.register(self._close_at_exit)
        self._write_frame(b"I", json.dumps(self._config).encode())

    def _send_tails(self) -> None:
        """Writes reports the training thread left queued (no report came after them) once
        the interval since the last write is over, as the training thread would have."""
        while not self._closed:
            wait = self._last_send + self._interval - time.monotonic()
            if wait > 0 or not self._pending:
                time.sleep(wait if wait > 0 else self._interval)
                continue
            try:
                self._send_pending()
            except CourierGone:
                return  # raised to the training thread by its next report
            except Exception as e:  # noqa: BLE001 - raised by the next report instead
                if self._metrics_error is None:
                    self._metrics_error = str(e)

    def _read_answers(self) -> None:
        import subprocess

        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            answer = json.loads(line)
            if "delivered" in answer:
                if self._on_delivered is not None:
                    self._on_delivered(answer["delivered"])
                continue
            with self._answers:
                if "flushed" in answer:
                    self._flushed = answer["flushed"]
                elif answer.get("failed") == "checkpoint":
                    logger.warning(
                        "reporting checkpoint %s to the master failed: %s",
                        answer["storage_id"],
                        answer["message"],
                    )
                    if self._checkpoint_error is None:
                        self._checkpoint_error = (answer["storage_id"], answer["message"])
                else:
                    logger.warning("shipping metrics failed: %s", answer["message"])
                    if self._metrics_error is None:
                        self._metrics_error = answer["message"]
                self._answers.notify_all()
        if not self._closed:
            try:
                self._proc.wait(timeout=5)  # its output ends just before it does: get its exit code
            except subprocess.TimeoutExpired:
                pass
        with self._answers:
            self._gone = True
            if not self._closed and self._metrics_error is None:
                self._metrics_error = self._gone_text()  # raised by the next report
            self._answers.notify_all()

    def _stop_child(self) -> None:
        assert self._proc is not None
        try:
            with self._write_lock:
                self._write_frame(b"Q", b"")
        except CourierGone:
            pass
        assert self._proc.stdin is not None
        self._proc.stdin.close()  # the end of input, in case the quit frame could not be written
        started = time.monotonic()
        assert self._reader is not None
        while True:
            self._reader.join(timeout=_DRAIN_LOG_INTERVAL_S)
            if not self._reader.is_alive():
                break
            logger.info(
                "waiting for queued reports to reach the master (%.0f s so far)",
                time.monotonic() - started,
            )
        code = self._proc.wait()
        if code != 0 and self._metrics_error is None:
            self._metrics_error = f"the report courier process exited with code {code}"

    def _gone_text(self) -> str:
        code = self._proc.poll() if self._proc is not None else None
        return (
            f"the report courier process (which posts this trial's reports) ended "
            f"unexpectedly (exit code {code}); reports made since its last delivery are lost"
        )

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except Exception as e:  # noqa: BLE001 - nobody is left to raise to at exit
            logger.error("%s", e)

    def _raise_metrics_error(self) -> None:
        message, self._metrics_error = self._metrics_error, None
        raise RuntimeError(f"shipping metrics to the master failed: {message}")


class CourierCheckpointReporter:
    """`CheckpointReporter`'s interface over a `ReportCourier` (records go in the same order as
    the trial's reports)."""

    def __init__(self, courier: ReportCourier) -> None:
        self._courier = courier

    def submit(self, storage_id: str, payload: bytes) -> None:
        self._courier.submit_checkpoint(storage_id, payload)
        self.raise_error()

    def flush(self) -> None:
        self._courier.flush()
        self.raise_error()

    def close(self) -> None:
        self._courier.close_quietly()
        self.raise_error()

    def raise_error(self) -> None:
        failure = self._courier.take_checkpoint_error()
        if failure is None:
            return
        raise report_failed(*failure)
