"""Issue 26 row 12: reports made while the master is unreachable wait in a spool (memory and an
append-only file) and are delivered, once each and in order, when it is back; past the retry
window the failure names the file, and `resend_spools` delivers it later."""

from __future__ import annotations

import json
import pathlib
import threading

import pytest
import requests

from determined.common.api import APIError
from determined.core._metrics import QUEUE_SIZE, MetricsShipper
from determined.core._spool import (
    ReportSpool,
    is_retriable,
    read_spool,
    resend_spools,
    retry_delays,
)
from tests._support import wait_until


class FlakyMaster:
    """A session whose master is down (refused connections) until `up` is set."""

    master_url = "http://127.0.0.1:1"

    def __init__(self) -> None:
        self.up = threading.Event()
        self.refused = 0
        self.posts: list[tuple[str, dict]] = []
        self.connect_retries = 5

    def request(self, method, path, data=None, headers=None, **kw):
        if not self.up.is_set():
            self.refused += 1
            raise APIError(0, "cannot reach the master at http://127.0.0.1:1: Connection refused")
        self.posts.append((path, json.loads(data)))


def _item(step: int) -> tuple:
    return ("training", step, {"loss": 1.0 / step}, None, 1_700_000_000.0 + step)


def _stored_steps(master: FlakyMaster) -> list[int]:
    return [
        report["steps_completed"]
        for path, body in master.posts
        if path.endswith("/metrics")
        for report in body["reports"]
    ]


def test_reports_made_while_the_master_is_down_arrive_once_in_order(tmp_path):
    master = FlakyMaster()
    shipper = MetricsShipper(master, 7, 1, retry_window_s=60, spool_dir=tmp_path)
    assert master.connect_retries == 0  # the shipper's own backoff decides
    shipper.start()
    shipper.put(_item(1))
    wait_until(lambda: list(tmp_path.glob("trial-7-*.jsonl")), 10, "the spool file")
    # More reports than the in-memory queue holds: they still return (they go to the spool).
    for step in range(2, 3 * QUEUE_SIZE):
        shipper.put(_item(step))
    [spool_file] = tmp_path.glob("trial-7-*.jsonl")
    header, _ = read_spool(spool_file)
    assert header == {"master_url": master.master_url, "trial_id": 7}
    wait_until(lambda: master.refused >= 2, 10, "a retry")
    master.up.set()
    shipper.close()
    assert _stored_steps(master) == list(range(1, 3 * QUEUE_SIZE))
    assert not spool_file.exists(), "a delivered spool is removed"


def test_past_the_window_the_error_names_the_file_and_resend_delivers_it(tmp_path):
    master = FlakyMaster()
    shipper = MetricsShipper(
        master, 7, 1, retry_window_s=0.5, spool_dir=tmp_path, resend_hint="run it again"
    )
    shipper.start()
    for step in range(1, 11):
        shipper.put(_item(step))
    with pytest.raises(RuntimeError, match="shipping metrics to the master failed") as raised:
        shipper.close()
    [spool_file] = tmp_path.glob("trial-7-*.jsonl")
    assert str(spool_file) in str(raised.value) and "run it again" in str(raised.value)

    master.up.set()
    delivered: list[tuple[str, bytes]] = []
    assert resend_spools(tmp_path, "http://elsewhere:1", 7, lambda p, b: delivered.append(p)) == 0
    assert resend_spools(tmp_path, master.master_url, 8, lambda p, b: delivered.append(p)) == 0
    assert not delivered and spool_file.exists(), "another master's or trial's file stays"
    sent = resend_spools(
        tmp_path, master.master_url, 7, lambda p, b: master.request("POST", p, data=b)
    )
    assert sent >= 1 and not spool_file.exists()
    assert _stored_steps(master) == list(range(1, 11))


def test_a_torn_last_line_and_delivered_requests_are_skipped(tmp_path):
    spool = ReportSpool(tmp_path, "http://m:1", 3)
    spool.append("/trials/3/metrics", b'{"reports": [1]}')
    spool.append("/trials/3/metrics", b'{"reports": [2]}')
    assert spool.path is not None
    with open(spool.path, "a") as f:
        f.write('{"done": 1}\n{"seq": 3, "pa')  # killed mid-write
    header, pending = read_spool(spool.path)
    assert header["trial_id"] == 3
    assert pending == [("/trials/3/metrics", b'{"reports": [2]}')]


def test_a_failure_of_the_request_itself_is_not_retried(tmp_path):
    assert not is_retriable(APIError(400, "report 0: group 'a.b' may not contain '.'"))
    assert not is_retriable(APIError(401, "unknown token"))
    assert is_retriable(APIError(0, "unreachable")) and is_retriable(APIError(503, "busy"))
    assert is_retriable(ConnectionRefusedError())
    assert is_retriable(requests.ReadTimeout()) and is_retriable(requests.ConnectionError())
    assert not is_retriable(requests.TooManyRedirects()) and not is_retriable(ValueError())
    delays = retry_delays()
    first = [next(delays) for _ in range(12)]
    assert 0.125 <= first[0] <= 0.25 and all(2.5 <= d <= 5.0 for d in first[6:])


def test_without_a_directory_the_spool_stays_in_memory(tmp_path: pathlib.Path):
    spool = ReportSpool(None, "http://m:1", 3)
    spool.append("/trials/3/metrics", b"{}")
    assert not spool.on_disk and spool.path is None and len(spool.pending) == 1
    spool.deliver(lambda path, body: None)
    assert spool.pending == []
