"""Reports the master has not stored yet, kept on local disk while it is unreachable.

A report call returns before its POST (`MetricsShipper` posts from a thread), so a master that
dies and comes back must not lose what was reported in between. When a POST cannot reach the
master, the shipper writes it, and everything reported after it, to a `ReportSpool`: an
append-only file of JSON lines, one per request (`{"seq", "path", "body"}`) and one per delivery
(`{"done": seq}`). It then retries (`retry_delays`: exponential backoff with jitter) for the
retry window; delivered in order, the file is removed. A report POSTed again after an answer
that was lost is stored once: the master keeps one report per (trial, run, group, step) with
equal metrics (docs/fault-tolerance.md).

Past the window the file stays and the report call (or `close()`) raises naming it; an
unmanaged run resends such files when it is opened again with the same external ids
(`resend_spools`). Each line is flushed when written: the file survives the process being
killed (not an operating-system crash, like the master's own store).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import random
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger("determined.core")

# Statuses of a master that is (re)starting behind a proxy (Jupyter's answers 502/503/599 while
# the hosted master is down): the request never reached a master that could store it.
RETRIABLE_STATUSES = frozenset({0, 502, 503, 504, 599})
# How long a managed trial's reporters retry an unreachable master (docs/fault-tolerance.md):
# generous, since a restarted master ends and resumes managed runs anyway; unmanaged runs use
# their lease. Read when a reporter is made.
DEFAULT_RETRY_WINDOW_S = 600.0
_FIRST_DELAY_S = 0.25
_MAX_DELAY_S = 5.0


def is_retriable(error: BaseException) -> bool:
    """True for a failure of the master's reachability, not of the request: refused or reset
    connections, timeouts (the POST may have been stored; a repeat is stored once), and a
    proxy's "no upstream" answers. A 4xx is the request's own fault and is never retried."""
    status = getattr(error, "status", None)
    if status is not None:
        return status in RETRIABLE_STATUSES
    try:
        import requests
    except ImportError:  # pragma: no cover - requests is a dependency of the package
        return isinstance(error, OSError)
    if isinstance(error, requests.RequestException):  # an OSError too: only these two
        return isinstance(error, (requests.ConnectionError, requests.Timeout))
    return isinstance(error, OSError)


def retry_delays(rng: random.Random | None = None) -> Iterator[float]:
    """Pauses between tries: doubling from 0.25 s up to 5 s, each drawn from [d/2, d] ("equal
    jitter"), so the runs of a master that comes back do not all retry in step."""
    rng = rng or random.Random()
    delay = _FIRST_DELAY_S
    while True:
        yield rng.uniform(delay / 2, delay)
        delay = min(delay * 2, _MAX_DELAY_S)


def default_spool_dir() -> pathlib.Path:
    """Where unmanaged runs keep unsent reports: `$DET_REPORT_SPOOL_DIR`, else
    `$XDG_CACHE_HOME/determined/report-spool` (`~/.cache/...`)."""
    given = os.environ.get("DET_REPORT_SPOOL_DIR")
    if given:
        return pathlib.Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "determined" / "report-spool"


class ReportSpool:
    """The append-only file of one shipper's undelivered requests (see the module docstring).

    Created lazily: a run whose master never goes away writes nothing. `master_url` and
    `trial_id` go in the first line, so `resend_spools` finds the files of a trial. Without a
    directory the requests are kept in memory only (`on_disk` is False).
    """

    def __init__(self, directory: pathlib.Path | None, master_url: str, trial_id: int) -> None:
        self.on_disk = directory is not None
        self.path = (
            directory / f"trial-{trial_id}-pid-{os.getpid()}-{id(self):x}.jsonl"
            if directory is not None
            else None
        )
        self._directory = directory
        self._header = {"master_url": master_url.rstrip("/"), "trial_id": trial_id}
        self._file: Any = None
        self._seq = 0
        self.pending: list[tuple[int, str, bytes]] = []  # kept in memory too: sent from here

    def append(self, path: str, body: bytes) -> None:
        self._seq += 1
        self.pending.append((self._seq, path, body))
        if self._directory is None or self.path is None:
            return
        if self._file is None:
            self._directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._file = os.fdopen(fd, "a", encoding="utf-8")
            self._write(self._header)
        self._write({"seq": self._seq, "path": path, "body": body.decode()})

    def deliver(self, post: Callable[[str, bytes], None]) -> None:
        """POST what is pending, in order; each delivered request is marked done at once. The
        file is removed when nothing is left. Raises the first failure (the rest stay)."""
        while self.pending:
            seq, path, body = self.pending[0]
            post(path, body)
            self.pending.pop(0)
            self._write({"done": seq})
        self.remove()

    def remove(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            assert self.path is not None
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass

    def _write(self, record: dict) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()


def read_spool(path: pathlib.Path) -> tuple[dict, list[tuple[str, bytes]]]:
    """(header, undelivered (path, body) in order) of a spool file; a torn last line (the
    writer was killed mid-write) is ignored."""
    header: dict = {}
    requests: dict[int, tuple[str, bytes]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if number == 0:
            header = record
        elif "done" in record:
            requests.pop(int(record["done"]), None)
        elif "seq" in record:
            requests[int(record["seq"])] = (str(record["path"]), record["body"].encode())
    return header, [requests[seq] for seq in sorted(requests)]


def resend_spools(
    directory: pathlib.Path,
    master_url: str,
    trial_id: int,
    post: Callable[[str, bytes], None],
) -> int:
    """Send the reports an earlier process of this trial left in `directory` (its master was
    unreachable past the retry window); returns how many requests were sent. A file is removed
    once all of it is delivered; a failure leaves it and is logged (the next open tries again)."""
    sent = 0
    if not directory.is_dir():
        return 0
    for path in sorted(directory.glob(f"trial-{trial_id}-pid-*.jsonl")):
        try:
            header, pending = read_spool(path)
        except OSError as e:
            logger.warning("cannot read the report spool %s: %s", path, e)
            continue
        if header.get("master_url") != master_url.rstrip("/") or header.get("trial_id") != trial_id:
            continue
        try:
            for request_path, body in pending:
                post(request_path, body)
                sent += 1
        except Exception as e:  # noqa: BLE001 - kept for the next open; the run goes on
            logger.warning("resending reports from %s failed (kept for later): %s", path, e)
            continue
        path.unlink()
        logger.info("resent %d request(s) of trial %d from %s", len(pending), trial_id, path)
    return sent


__all__ = [
    "DEFAULT_RETRY_WINDOW_S",
    "ReportSpool",
    "default_spool_dir",
    "is_retriable",
    "read_spool",
    "resend_spools",
    "retry_delays",
]
