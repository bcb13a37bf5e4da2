"""Checkpoint records are POSTed from a background thread (CheckpointReporter).

The sessions here stand in for the master connection only (they record what was posted); the
checkpoint context, its storage and its reporter thread are the real ones. The e2e tests
(test_core_e2e.py) cover the same path through a running master.
"""

import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from determined.common import storage
from determined.common.api import APIError, NotFound
from determined.core import _spool
from determined.core._checkpoint import CheckpointContext
from determined.core._distributed import DummyDistributedContext

ROOT = pathlib.Path(__file__).resolve().parents[3]


class RecordingMaster:
    """What the master saw, in order; `gate` (an Event) holds every POST until it is set."""

    def __init__(self, gate=None, fail_with=None, failures=1000):
        self.calls = []
        self.stored = {}
        self.gate = gate
        self.fail_with = fail_with
        self.failures = failures  # how many POSTs fail with fail_with
        self.lock = threading.Lock()

    def request(self, method, path, data=None, headers=None, **kw):
        assert (method, headers) == ("POST", {"Content-Type": "application/json"})
        return self.post(path, json.loads(data))

    def post(self, path, body=None, **kw):
        if self.gate is not None:
            assert self.gate.wait(30), "the test never opened the gate"
        if self.fail_with is not None and self.failures > 0:
            self.failures -= 1
            raise self.fail_with
        with self.lock:
            self.calls.append(("POST", path, body))
            self.stored[body["uuid"]] = body
        return {}

    def patch(self, path, body=None, **kw):
        with self.lock:
            self.calls.append(("PATCH", path, body))
        return {}

    def get(self, path, params=None, **kw):
        uuid = path.rsplit("/", 1)[1]
        with self.lock:
            if uuid not in self.stored:
                raise NotFound(404, f"checkpoint {uuid} not found")
            return {"checkpoint": {"metadata": self.stored[uuid]["metadata"]}}


def make_context(tmp_path, master):
    # The main session and the reporter thread's session are the same recorder here.
    return CheckpointContext(
        DummyDistributedContext(),
        storage.StorageManager(tmp_path / "store"),
        master,
        task_id="t",
        allocation_id="a",
        trial_id=3,
        session_factory=lambda: master,
    )


def test_store_path_returns_before_the_report_and_close_drains_it(tmp_path):
    gate = threading.Event()
    master = RecordingMaster(gate=gate)
    ckpt = make_context(tmp_path, master)
    with ckpt.store_path({"steps_completed": 7}) as (path, uuid):
        (path / "weights").write_text("w")
    # The POST is still held: the caller got control back with the files already in storage.
    assert master.calls == []
    stored = tmp_path / "store" / uuid
    assert json.loads((stored / "metadata.json").read_text()) == {"steps_completed": 7}
    assert (stored / "weights").read_text() == "w"
    gate.set()
    ckpt._close()
    ((method, where, body),) = master.calls
    assert (method, where) == ("POST", "/checkpoints")
    assert body["uuid"] == uuid and body["trialId"] == 3 and body["state"] == "COMPLETED"
    assert body["metadata"] == {"steps_completed": 7}
    assert body["resources"] == {
        "weights": 1,
        "metadata.json": len(json.dumps({"steps_completed": 7}, indent=2)),
    }


def test_reports_keep_their_order(tmp_path):
    master = RecordingMaster()
    ckpt = make_context(tmp_path, master)
    uuids = []
    for steps in range(1, 6):
        with ckpt.store_path({"steps_completed": steps}) as (path, uuid):
            (path / "f").write_text(str(steps))
        uuids.append(uuid)
    uuids.append(ckpt.upload(tmp_path / "store" / uuids[0], {"steps_completed": 6}))
    ckpt._close()
    assert [body["uuid"] for _, _, body in master.calls] == uuids
    assert [body["metadata"]["steps_completed"] for _, _, body in master.calls] == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]


def test_the_report_is_what_the_metadata_was_at_the_call(tmp_path):
    gate = threading.Event()
    master = RecordingMaster(gate=gate)
    ckpt = make_context(tmp_path, master)
    metadata = {"steps_completed": 1, "data": {"epoch": 1}}
    with ckpt.store_path(metadata) as (path, uuid):
        (path / "f").write_text("x")
    metadata["data"]["epoch"] = 2  # the loop goes on while the record waits to be posted
    gate.set()
    ckpt._close()
    assert master.stored[uuid]["metadata"] == {"steps_completed": 1, "data": {"epoch": 1}}


def test_missing_steps_completed_is_still_raised_in_the_call(tmp_path):
    master = RecordingMaster()
    ckpt = make_context(tmp_path, master)
    with pytest.raises(ValueError, match="steps_completed"):
        with ckpt.store_path({"note": "no steps"}) as (path, uuid):
            (path / "f").write_text("x")
    ckpt._close()
    assert master.calls == []


def test_get_metadata_sees_a_checkpoint_saved_just_before(tmp_path):
    class SlowMaster(RecordingMaster):
        def request(self, method, path, data=None, **kw):
            time.sleep(0.3)  # the record reaches the master well after store_path returned
            return super().request(method, path, data=data, **kw)

    ckpt = make_context(tmp_path, SlowMaster())
    with ckpt.store_path({"steps_completed": 2, "k": "v"}) as (path, uuid):
        (path / "f").write_text("x")
    assert ckpt.get_metadata(uuid) == {"steps_completed": 2, "k": "v"}
    ckpt._close()


def test_delete_is_reported_after_the_checkpoint(tmp_path):
    gate = threading.Event()
    master = RecordingMaster(gate=gate)
    ckpt = make_context(tmp_path, master)
    with ckpt.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "f").write_text("x")
    threading.Timer(0.3, gate.set).start()
    ckpt.delete(uuid)
    assert not path.exists()
    assert [
        (method, body.get("uuid") or body["checkpoints"][0]["uuid"])
        for method, _, body in master.calls
    ] == [("POST", uuid), ("PATCH", uuid)]
    ckpt._close()


def test_a_failed_report_resurfaces_in_the_caller(tmp_path):
    master = RecordingMaster(fail_with=APIError(500, "database is locked"), failures=1)
    ckpt = make_context(tmp_path, master)
    saved = []
    deadline = time.monotonic() + 10
    # The failure of the first record is raised by the first checkpoint call that finds it
    # recorded (that may be the first one itself, if its POST failed fast enough).
    with pytest.raises(RuntimeError) as raised:
        while time.monotonic() < deadline:
            with ckpt.store_path({"steps_completed": len(saved) + 1}) as (path, uuid):
                saved.append(uuid)
                (path / "f").write_text("x")
            time.sleep(0.01)
    failed = saved[0]
    message = str(raised.value)
    assert failed in message and "database is locked" in message
    assert isinstance(raised.value.__cause__, APIError)
    # Raised once: the files stay, and later checkpoints are reported again.
    assert (tmp_path / "store" / failed / "f").exists()
    with ckpt.store_path({"steps_completed": 100}) as (path, last):
        (path / "f").write_text("z")
    ckpt._close()
    assert last in master.stored and failed not in master.stored


def test_a_failed_report_resurfaces_at_close(tmp_path, monkeypatch):
    # An unreachable master is retried for the window (here short), then reported.
    monkeypatch.setattr(_spool, "DEFAULT_RETRY_WINDOW_S", 0.3)
    master = RecordingMaster(fail_with=APIError(0, "cannot reach the master"))
    ckpt = make_context(tmp_path, master)
    with ckpt.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "f").write_text("x")
    with pytest.raises(RuntimeError, match=f"reporting checkpoint {uuid} to the master failed"):
        ckpt._close()
    with pytest.raises(RuntimeError, match="after core.Context was closed"):
        ckpt._report_checkpoint("late", {}, {"steps_completed": 2})


def test_a_master_that_comes_back_within_the_window_gets_the_record(tmp_path):
    # Issue 26 row 12: a restarting master (refused connections, a proxy's 502) is not a
    # failure while the retry window lasts; the record arrives once it is back.
    master = RecordingMaster(fail_with=APIError(502, "Bad Gateway"), failures=3)
    ckpt = make_context(tmp_path, master)
    with ckpt.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "f").write_text("x")
    ckpt._close()
    assert list(master.stored) == [uuid] and master.failures == 0


EXITS_RIGHT_AFTER_A_CHECKPOINT = r"""
import json, pathlib, sys, time
from determined.common import storage
from determined.core import _spool
from determined.core._checkpoint import CheckpointContext
from determined.core._distributed import DummyDistributedContext

record = pathlib.Path(sys.argv[1])

class SlowMaster:
    def request(self, method, path, data, headers):
        time.sleep(0.5)  # the process has long reached its last line
        record.write_text(json.loads(data)["uuid"])

ckpt = CheckpointContext(DummyDistributedContext(), storage.StorageManager(sys.argv[2]), None,
                         trial_id=1, session_factory=SlowMaster)
with ckpt.store_path({"steps_completed": 1}) as (path, uuid):
    (path / "f").write_text("x")
print(uuid)
"""


def test_interpreter_exit_posts_what_is_queued(tmp_path):
    # Nothing closes the context here: the queued record is still posted before the process ends.
    record = tmp_path / "posted"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "harness")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            EXITS_RIGHT_AFTER_A_CHECKPOINT,
            str(record),
            str(tmp_path / "store"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert record.read_text() == done.stdout.strip()
