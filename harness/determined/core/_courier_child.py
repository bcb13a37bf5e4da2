"""The report courier's child process: POSTs a trial's reports to the master (stdlib only).

Started by `determined.core._courier.ReportCourier` as `python -I -S <this file>`, so it loads
nothing but the standard library (~40 ms) and never the user's code or frameworks. It reads
frames from stdin, each `kind (1 byte) + length (4 bytes, big-endian) + payload`:

* `I` (first frame only): the JSON config: master_url, token, trial_id, timeout_s,
  connect_retries, retry_window_s, report_deliveries.
* `R`: reports (their number, a newline, and a JSON array of them, encoded by the parent, which
  coalesces training reports: it writes at most one such frame per interval unless a report of
  another group, which the searcher may wait on, comes).
* `P`: a progress body; only the latest is posted, after the reports.
* `C`: `storage_id + b"\\n" + body` of `POST /checkpoints`; queued reports go out first.
* `F`: a flush marker (payload: its number): everything before it is posted, then it is answered.
* `Q`, or the end of stdin (the parent exited): post everything, then exit.

Whatever one read of the pipe returns is posted at once: its reports as one
`POST /trials/{id}/metrics`, then the latest progress.

It answers on stdout, one JSON object per line: `{"flushed": n}`, `{"delivered": n}` (metric
reports delivered so far; only when `report_deliveries`), and failures
`{"failed": "metrics" | "checkpoint", "message": ..., "storage_id": ...}`. A failed POST is
reported and dropped; the parent raises it in the training thread. An unreachable master (a
restart: refused or reset connections, timeouts, a proxy's 502/503/504) is not a failure until
it has lasted `retry_window_s`: the POST is retried with jittered backoff meanwhile (every POST
here is idempotent: the master stores a repeated report or checkpoint record once).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import ssl  # http.client imports it anyway
import struct
import sys
import time
import urllib.parse
from typing import Any

_HEADER = struct.Struct(">cI")
# A master restarting behind a proxy (Jupyter's) is answered for by the proxy with these.
_RETRIABLE_STATUSES = (502, 503, 504, 599)


class DeliveryError(Exception):
    """A POST failed for good (an error answer, or the master stayed unreachable)."""


class Poster:
    """POSTs JSON bodies to the master over one keep-alive connection. An unreachable master
    (the master may be restarting) is retried with a growing, jittered pause until it has been
    tried `connect_retries` times and for `retry_window_s` seconds."""

    def __init__(
        self,
        master_url: str,
        token: str | None,
        timeout: float,
        connect_retries: int,
        retry_window_s: float = 0.0,
    ) -> None:
        parsed = urllib.parse.urlsplit(master_url)
        self._master_url = master_url
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname or "localhost"
        self._port = parsed.port
        self._prefix = parsed.path.rstrip("/") + "/api/v1"
        self._headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout = timeout
        self._connect_retries = connect_retries
        self._retry_window_s = retry_window_s
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self._timeout, context=_tls_context()
                )
            else:
                self._conn = http.client.HTTPConnection(
                    self._host, self._port, timeout=self._timeout
                )
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def post(self, path: str, body: bytes) -> None:
        delay = 0.25
        attempt = 0
        started = time.monotonic()
        while True:
            reused = self._conn is not None
            try:
                conn = self._connection()
                conn.request("POST", self._prefix + path, body=body, headers=self._headers)
                response = conn.getresponse()
                answer = response.read()
                if response.will_close:
                    self._drop_connection()
            except ssl.SSLError as e:  # an untrusted certificate does not get better by waiting
                self._drop_connection()
                raise DeliveryError(f"cannot reach the master at {self._master_url}: {e}") from e
            except (OSError, http.client.HTTPException) as e:
                self._drop_connection()
                if (
                    reused
                    and attempt == 0
                    and isinstance(
                        e, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
                    )
                ):
                    attempt += 1  # the master closed an idle keep-alive connection: try a fresh one
                    continue
                if isinstance(e, TimeoutError):
                    text = f"the master at {self._master_url} did not answer within "
                    text += f"{self._timeout:.0f} s"
                else:
                    text = f"cannot reach the master at {self._master_url}: {e}"
                if not self._may_retry(attempt, started):
                    raise DeliveryError(text) from e
            else:
                if response.status in _RETRIABLE_STATUSES and self._may_retry(attempt, started):
                    pass  # a proxy in front of a restarting master: try again
                elif response.status >= 400:
                    raise DeliveryError(_error_text(response.status, response.reason, answer))
                else:
                    return
            attempt += 1
            # "Equal jitter": couriers of many trials do not retry a returning master in step.
            time.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, 5.0)

    def _may_retry(self, attempt: int, started: float) -> bool:
        return attempt < self._connect_retries or time.monotonic() - started < self._retry_window_s

    def close(self) -> None:
        self._drop_connection()


def _tls_context() -> Any:
    """The certificates `requests` (the trial's other HTTP client) trusts: a CA bundle named by
    REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE (a file or a directory), else the system's."""
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle and os.path.isdir(bundle):
        return ssl.create_default_context(capath=bundle)
    return ssl.create_default_context(cafile=bundle or None)


def _error_text(status: int, reason: str, answer: bytes) -> str:
    """The master's message, as `determined.common.api.APIError` words it."""
    try:
        body = json.loads(answer)
    except ValueError:
        body = None
    if isinstance(body, dict):
        message = str(body.get("message") or body.get("reason") or reason)
        errors = body.get("errors") or []
        return message if not errors else message + "\n" + "\n".join(f"  {e}" for e in errors)
    return f"{status} {reason}: {answer[:200].decode('utf-8', 'replace')}"


class Courier:
    """Posts what the parent sends, in the order it was sent.

    The parent already coalesces training reports (it writes at most one frame of them per
    interval), so whatever arrives goes out at once: everything read in one go becomes one POST.
    """

    def __init__(self, config: dict, poster: Poster, data_fd: int, answer: Any) -> None:
        self._metrics_path = f"/trials/{int(config['trial_id'])}/metrics"
        self._progress_path = f"/trials/{int(config['trial_id'])}/progress"
        self._report_deliveries = bool(config.get("report_deliveries"))
        self._poster = poster
        self._data_fd = data_fd
        self._answer = answer
        self._unparsed = bytearray()
        self._reports: list[bytes] = []  # JSON fragments: reports separated by commas
        self._report_count = 0
        self._progress: bytes | None = None
        self._delivered = 0

    def run(self) -> None:
        while True:
            chunk = os.read(self._data_fd, 1 << 20)  # waits for the parent; then all it wrote
            # The end of the pipe: quit, or the parent died; what it wrote is still posted.
            ended = not chunk
            self._unparsed += chunk
            for kind, payload in self._complete_frames():
                if kind == b"Q":
                    ended = True
                    break
                self._take(kind, payload)
            self.ship_metrics()
            if ended:
                return

    def _take(self, kind: bytes, payload: bytes) -> None:
        if kind == b"R":
            count, _, array = payload.partition(b"\n")
            self._reports.append(array[1:-1])  # the array's items join the queued ones
            self._report_count += int(count)
        elif kind == b"P":
            self._progress = payload
        elif kind == b"C":
            self.ship_metrics()
            self._post_checkpoint(payload)
        elif kind == b"F":
            self.ship_metrics()
            self._send({"flushed": int(payload)})
        else:
            raise ValueError(f"report courier: unknown frame kind {kind!r}")

    def _complete_frames(self) -> list[tuple[bytes, bytes]]:
        """Take the complete frames out of the unparsed bytes (a partial one stays for later)."""
        buffer, at, frames = self._unparsed, 0, []
        while len(buffer) - at >= _HEADER.size:
            kind, length = _HEADER.unpack_from(buffer, at)
            if len(buffer) - at - _HEADER.size < length:
                break
            start = at + _HEADER.size
            frames.append((kind, bytes(buffer[start : start + length])))
            at = start + length
        del buffer[:at]
        return frames

    # --- posting -----------------------------------------------------------------------------
    def ship_metrics(self) -> None:
        """POST the queued reports as one batch, then the latest progress."""
        reports, self._reports = self._reports, []
        count, self._report_count = self._report_count, 0
        progress, self._progress = self._progress, None
        if reports:
            body = b'{"reports":[' + b",".join(reports) + b"]}"
            try:
                self._poster.post(self._metrics_path, body)
            except DeliveryError as e:
                self._send(
                    {
                        "failed": "metrics",
                        "message": f"{count} metric report(s) were not stored: {e}",
                    }
                )
            else:
                self._delivered += count
                if self._report_deliveries:
                    self._send({"delivered": self._delivered})
        if progress is not None:
            try:
                self._poster.post(self._progress_path, progress)
            except DeliveryError as e:
                self._send(
                    {"failed": "metrics", "message": f"the progress report was not stored: {e}"}
                )

    def _post_checkpoint(self, payload: bytes) -> None:
        storage_id, _, body = payload.partition(b"\n")
        try:
            self._poster.post("/checkpoints", body)
        except DeliveryError as e:
            self._send(
                {"failed": "checkpoint", "storage_id": storage_id.decode(), "message": str(e)}
            )

    def _send(self, message: dict) -> None:
        self._answer.write(json.dumps(message).encode() + b"\n")
        self._answer.flush()


def _read_config(fd: int) -> dict | None:
    """The first frame, read blocking: `I` + the JSON config."""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    kind, length = _HEADER.unpack(header)
    payload = _read_exactly(fd, length)
    if kind != b"I" or payload is None:
        raise SystemExit(f"report courier: expected the config frame first, got {kind!r}")
    return json.loads(payload)


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main() -> int:
    # Ctrl-C in a terminal reaches the whole process group: the parent decides when this ends
    # (a quit frame, or its end of the pipe closing), so queued reports are still posted.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SCHED_BATCH: waking up never preempts what runs on that core (Linux), which is usually
    # the training loop that just wrote to the pipe; the posts can wait a few milliseconds.
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except OSError:
            pass
    data_fd = sys.stdin.fileno()
    config = _read_config(data_fd)
    if config is None:
        return 0
    poster = Poster(
        config["master_url"],
        config.get("token"),
        float(config["timeout_s"]),
        int(config["connect_retries"]),
        float(config.get("retry_window_s") or 0.0),
    )
    try:
        Courier(config, poster, data_fd, sys.stdout.buffer).run()
    finally:
        poster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
