"""Ship metric reports to the master from a background thread, in batches.

The training thread only validates and enqueues; the shipper thread drains everything queued into
one POST (the batch form of `POST /trials/{id}/metrics`), so the loop never waits on HTTP.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from typing import Any

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
    """

    def __init__(self, session: Any, trial_id: int, trial_run_id: int) -> None:
        self._session = session
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
            if not batch:
                continue
            try:
                last_ship = time.monotonic()
                self._ship(batch)
            except BaseException as e:  # noqa: BLE001 - every failure must reach the caller
                logger.warning("shipping %d metric reports failed: %s", len(batch), e)
                if self._error is None:
                    self._error = e

    def _ship(self, batch: list) -> None:
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
        if reports:
            post_json(self._session, f"/trials/{self._trial_id}/metrics", {"reports": reports})
        if progress is not None:
            post_json(
                self._session,
                f"/trials/{self._trial_id}/progress",
                {"progress": progress, "is_raw": True},
            )


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


def post_json(session: Any, path: str, body: Any) -> None:
    """POST body encoded here: NaN/Infinity allowed (a diverged loss is still a metric) and
    numpy/torch scalars converted, neither of which `requests`' own json= encoding does."""
    payload = json.dumps(body, default=_json_default).encode()
    session.request("POST", path, data=payload, headers={"Content-Type": "application/json"})
