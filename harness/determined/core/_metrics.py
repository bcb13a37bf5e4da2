"""Ship metric reports to the master from a background thread, in batches.

The training thread only validates and enqueues; the shipper thread drains everything queued into
one POST (the batch form of `POST /trials/{id}/metrics`), so the loop never waits on HTTP.

A master that cannot be reached (it died and is restarting) loses nothing a report call
returned from: the shipper keeps what it could not POST in a `ReportSpool` (memory, and a file
when given a spool directory) and retries with backoff for its retry window (an unmanaged run's:
its lease), while the training loop goes on (`determined.core._spool`).
"""

from __future__ import annotations

import collections
import json
import logging
import pathlib
import threading
import time
from typing import Any

from determined.core import _spool
from determined.core._spool import ReportSpool, is_retriable, retry_delays

logger = logging.getLogger("determined.core")

QUEUE_SIZE = 1000
# Coalescing: at most one POST of training reports per interval. One HTTP request per report
# costs the training thread ~1-2 ms of GIL each (bench/bench_harness_overhead.py measured 2x
# wall time at one report per 10 fast batches); other groups and close() ship at once. A report
# made when the last POST is older than this goes out at once; otherwise it waits at most this
# long, which bounds the time from the report call to the point being stored (soak/soak_load.py:
# p99 < 100 ms under load, which a 0.1 s interval alone used up).
SHIP_INTERVAL_S = 0.05
_CLOSE = object()
_DRAIN_LOG_INTERVAL_S = 10.0


class MetricsShipper:
    """A daemon thread that POSTs queued reports; its errors resurface in the caller's thread.

    `session` is a `determined.common.api.Session` (the shipper uses its `request`).
    Items are tuples `(group, steps_completed, metrics, batch_metrics, report_time)`, or
    `("__progress__", fraction)` for the latest progress, which is posted after the batch.

    The queue is a deque (append/popleft are atomic) plus an Event to wake the shipper: the
    training thread pays for an append and, at most once per batch, an Event.set(), instead of
    queue.Queue's lock and condition round trip on every report.

    An unreachable master (refused or reset connections, timeouts, a proxy's 502/503/504) is
    retried for `retry_window_s` (default `_spool.DEFAULT_RETRY_WINDOW_S`); meanwhile reports
    move from the queue to the spool (a file under `spool_dir` when given), so report calls
    keep returning. Past the window the failure
    names the spool file and is raised like any other.
    """

    def __init__(
        self,
        session: Any,
        trial_id: int,
        trial_run_id: int,
        *,
        retry_window_s: float | None = None,
        spool_dir: pathlib.Path | None = None,
        resend_hint: str = "",
    ) -> None:
        self._session = session
        if hasattr(session, "connect_retries"):
            # The shipper retries an unreachable master itself (with backoff, for its window);
            # the session's own quick retries would only blur that.
            session.connect_retries = 0
        self._retry_window_s = (
            _spool.DEFAULT_RETRY_WINDOW_S if retry_window_s is None else retry_window_s
        )
        self._spool = ReportSpool(spool_dir, getattr(session, "master_url", ""), trial_id)
        self._resend_hint = resend_hint
        self._close_seen = False  # close() was taken from the queue while spilling
        self._trial_id = trial_id
        self._trial_run_id = trial_run_id
        self._pending: collections.deque = collections.deque()
        self._wakeup = threading.Event()
        self._ship_now = threading.Event()  # cuts the coalescing wait short
        self._room = threading.Condition()  # back-pressure when QUEUE_SIZE reports are pending
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="MetricsShipperThread", daemon=True)
        self._started = False
        self._closed = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def put(self, item: tuple) -> None:
        """Enqueue one report (called in the training thread: must stay cheap)."""
        if self._error is not None:
            self._raise_error()
        if self._closed:
            raise RuntimeError("metrics were reported after core.Context was closed")
        if len(self._pending) >= QUEUE_SIZE:
            self._wait_for_room()
        self._pending.append(item)
        if item[0] != "training":  # validation, progress, ...: the searcher may wait on it
            self._ship_now.set()
        if not self._wakeup.is_set():
            self._wakeup.set()

    def _wait_for_room(self) -> None:
        # The master is slower than the loop: wait, but never forever on a failed shipper.
        while len(self._pending) >= QUEUE_SIZE:
            if self._error is not None:
                self._raise_error()
            with self._room:
                if len(self._pending) >= QUEUE_SIZE:
                    self._room.wait(timeout=1.0)

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        raise RuntimeError(f"shipping metrics to the master failed: {error}") from error

    def close(self) -> None:
        """Ship everything queued, stop the thread, and raise any shipping error."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            self._pending.append(_CLOSE)
            self._ship_now.set()
            self._wakeup.set()
            started = time.monotonic()
            while True:
                self._thread.join(timeout=_DRAIN_LOG_INTERVAL_S)
                if not self._thread.is_alive():
                    break
                logger.info(
                    "waiting for %d queued metric reports to reach the master (%.0f s so far)",
                    len(self._pending),
                    time.monotonic() - started,
                )
        if self._error is not None:
            self._raise_error()

    def _run(self) -> None:
        pending = self._pending
        closing = False
        last_ship = 0.0
        while not closing:
            self._wakeup.wait()
            delay = last_ship + SHIP_INTERVAL_S - time.monotonic()
            if delay > 0 and len(pending) < QUEUE_SIZE // 2:
                self._ship_now.wait(delay)
            self._ship_now.clear()
            self._wakeup.clear()  # before draining: an append after this sets it again
            batch = []
            for _ in range(len(pending)):
                batch.append(pending.popleft())
            with self._room:
                self._room.notify_all()
            if batch and batch[-1] is _CLOSE:
                closing = True
                batch.pop()
            if not batch and not self._spool.pending:
                continue
            try:
                last_ship = time.monotonic()
                self._deliver(self._requests(batch))
            except BaseException as e:  # noqa: BLE001 - every failure must reach the caller
                logger.warning("shipping %d metric reports failed: %s", len(batch), e)
                if self._error is None:
                    self._error = e
            closing = closing or self._close_seen

    # -- delivery ------------------------------------------------------------------------------
    def _post(self, path: str, body: bytes) -> None:
        self._session.request("POST", path, data=body, headers={"Content-Type": "application/json"})

    def _deliver(self, requests: list[tuple[str, bytes]]) -> None:
        """POST in order; on an unreachable master, spool the rest and ride the outage out."""
        if self._spool.pending:  # an earlier outage left some: they go first
            for request in requests:
                self._spool.append(*request)
            self._ride_out()
            return
        for index, (path, body) in enumerate(requests):
            try:
                self._post(path, body)
            except Exception as e:
                if not is_retriable(e):
                    raise
                logger.warning(
                    "the master is unreachable (%s): keeping reports, retrying for %.0f s%s",
                    e,
                    self._retry_window_s,
                    f" (kept in {self._spool.path})" if self._spool.on_disk else "",
                )
                for request in requests[index:]:
                    self._spool.append(*request)
                self._ride_out()
                return

    def _ride_out(self) -> None:
        """Retry the spool until it is delivered or the window is over. Reports made meanwhile
        are moved into the spool, so the training loop never waits for room."""
        started = time.monotonic()
        delays = retry_delays()
        while True:
            self._spill_pending()
            try:
                count = len(self._spool.pending)
                self._spool.deliver(self._post)
                logger.info("the master is back: %d kept request(s) delivered", count)
                if self._pending:
                    self._wakeup.set()  # reports made since the last spill: the next batch
                return
            except Exception as e:
                waited = time.monotonic() - started
                if not is_retriable(e) or waited >= self._retry_window_s:
                    raise RuntimeError(self._undelivered_text(e, waited)) from e
                self._pause(min(next(delays), self._retry_window_s - waited))

    def _pause(self, seconds: float) -> None:
        """The backoff pause; a queue filling up meanwhile is spilled, so reports never wait."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            # Polled, not woken by each report: a fast loop would wake this thread (and take
            # the GIL from training) hundreds of times a second.
            time.sleep(min(left, 0.05))
            if len(self._pending) >= QUEUE_SIZE // 2:
                self._spill_pending()

    def _spill_pending(self) -> None:
        pending, items = self._pending, []
        for _ in range(len(pending)):
            item = pending.popleft()
            if item is _CLOSE:
                self._close_seen = True
                continue
            items.append(item)
        with self._room:
            self._room.notify_all()
        for request in self._requests(items):
            self._spool.append(*request)

    def _undelivered_text(self, error: BaseException, waited: float) -> str:
        kept = len(self._spool.pending)
        if self._spool.on_disk:
            where = f"they are kept in {self._spool.path}"
            if self._resend_hint:
                where += f"; {self._resend_hint}"
        else:
            where = "they are lost"
        return (
            f"{kept} report request(s) were not stored after {waited:.0f} s of retries "
            f"({error}); {where}"
        )

    def _requests(self, batch: list) -> list[tuple[str, bytes]]:
        """The POSTs of a batch: its reports as one, then the latest progress."""
        reports = []
        progress = None
        for item in batch:
            if item[0] == "__progress__":
                progress = item[1]
                continue
            group, steps_completed, metrics, batch_metrics, report_time = item
            report: dict = {
                "group": group,
                "steps_completed": steps_completed,
                "metrics": metrics,
                "trial_run_id": self._trial_run_id,
                "report_time": _iso(report_time),
            }
            if batch_metrics is not None:
                report["batch_metrics"] = batch_metrics
            reports.append(report)
        requests = []
        if reports:
            requests.append((f"/trials/{self._trial_id}/metrics", _encode({"reports": reports})))
        if progress is not None:
            requests.append(
                (
                    f"/trials/{self._trial_id}/progress",
                    _encode({"progress": progress, "is_raw": True}),
                )
            )
        return requests


_iso_cache: tuple = (None, "")


def _iso(timestamp: float) -> str:
    """UTC ISO-8601 with milliseconds; the formatted second is reused (datetime is slow)."""
    global _iso_cache
    second = int(timestamp)
    cached_second, prefix = _iso_cache
    if cached_second != second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _iso_cache = (second, prefix)
    return f"{prefix}.{int((timestamp - second) * 1000):03d}Z"


def _json_default(value: Any) -> Any:
    """Numbers from numpy/torch become plain Python values (called by json only for odd types)."""
    for method in ("item", "tolist"):
        convert = getattr(value, method, None)
        if callable(convert):
            try:
                return convert()
            except (TypeError, ValueError, RuntimeError):
                continue
    raise TypeError(
        f"metric value {value!r} of type {type(value).__name__} cannot be stored as JSON"
    )


def _encode(body: Any) -> bytes:
    """NaN/Infinity allowed (a diverged loss is still a metric) and numpy/torch scalars
    converted, neither of which `requests`' own json= encoding does."""
    return json.dumps(body, default=_json_default).encode()


def post_json(session: Any, path: str, body: Any) -> None:
    """POST body encoded by `_encode`."""
    session.request("POST", path, data=_encode(body), headers={"Content-Type": "application/json"})
