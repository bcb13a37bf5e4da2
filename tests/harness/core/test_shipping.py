"""MetricsShipper, TrainContext and PreemptContext against a recording session (no HTTP).

The session here stands in for the master connection only; the shipper, train and preempt code
under test are the real ones.
"""

import json
import math
import threading
import time

import pytest

from determined.common.api import APIError
from determined.core._distributed import DummyDistributedContext
from determined.core._metrics import MetricsShipper
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._tensorboard import TensorboardManager, TensorboardMode
from determined.core._train import TrainContext
from tests._support import wait_until


class RecordingSession:
    def __init__(self, fail_with=None, gate=None):
        self.posts = []
        self.gets = []
        self.fail_with = fail_with
        self.gate = gate  # threading.Event: posts wait on it, to let reports pile up
        self.entered = threading.Event()  # set once a post has started

    def request(self, method, path, data=None, **kw):
        # MetricsShipper posts pre-encoded JSON through Session.request
        return self.post(path, json.loads(data))

    def post(self, path, body=None, **kw):
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(30)
        if self.fail_with is not None:
            raise self.fail_with
        self.posts.append((path, body))
        return {}

    def get(self, path, params=None, **kw):
        self.gets.append((path, params))
        return {}


def make_train(session):
    shipper = MetricsShipper(session, trial_id=5, trial_run_id=2)
    tb = TensorboardManager(TensorboardMode.AUTO, None, 1, 5)
    return TrainContext(session, 5, 2, 1, shipper, tb)


def test_reports_are_batched_and_close_drains():
    gate = threading.Event()
    session = RecordingSession(gate=gate)
    train = make_train(session)
    train._start()
    for step in range(1, 51):
        train.report_training_metrics(steps_completed=step, metrics={"x": step})
    train.report_progress(0.5)
    train.report_validation_metrics(steps_completed=50, metrics={"x": 50})
    gate.set()
    train._close()
    metric_posts = [body for path, body in session.posts if path == "/trials/5/metrics"]
    reports = [r for body in metric_posts for r in body["reports"]]
    assert [(r["group"], r["steps_completed"], r["metrics"]) for r in reports] == (
        [("training", s, {"x": s}) for s in range(1, 51)] + [("validation", 50, {"x": 50})]
    )
    assert all(r["trial_run_id"] == 2 and r["report_time"].endswith("Z") for r in reports)
    # the first post was blocked on the gate, everything after it went in (at most) one more batch
    assert len(metric_posts) <= 3
    assert ("/trials/5/progress", {"progress": 0.5, "is_raw": True}) in session.posts


def test_caller_mutating_its_dict_does_not_change_the_report():
    gate = threading.Event()
    session = RecordingSession(gate=gate)
    train = make_train(session)
    train._start()
    metrics = {"x": 1}
    train.report_training_metrics(steps_completed=1, metrics=metrics)
    metrics["x"] = 999
    gate.set()
    train._close()
    assert session.posts[0][1]["reports"][0]["metrics"] == {"x": 1}


def test_shipping_error_resurfaces_in_the_caller_thread():
    session = RecordingSession(fail_with=APIError(400, "report 0: group 'a.b' may not contain '.'"))
    train = make_train(session)
    train._start()
    train.report_training_metrics(steps_completed=1, metrics={"x": 1})
    deadline = time.monotonic() + 10
    with pytest.raises(RuntimeError, match="shipping metrics to the master failed"):
        while time.monotonic() < deadline:
            train.report_training_metrics(steps_completed=2, metrics={"x": 2})
            time.sleep(0.01)
    session.fail_with = None
    train._close()


def test_shipping_error_resurfaces_at_close():
    session = RecordingSession(fail_with=APIError(500, "boom"))
    train = make_train(session)
    train._start()
    train.report_training_metrics(steps_completed=1, metrics={"x": 1})
    with pytest.raises(RuntimeError, match="boom"):
        train._close()


def test_progress_range_is_checked_in_the_caller():
    train = make_train(RecordingSession())
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        train.report_progress(1.5)


def test_numpy_like_values_are_converted_in_the_shipper():
    class Scalar:
        def __init__(self, v):
            self.v = v

        def item(self):
            return self.v

    session = RecordingSession()
    train = make_train(session)
    train._start()
    train.report_training_metrics(steps_completed=1, metrics={"loss": Scalar(0.25)})
    train._close()
    assert session.posts[0][1]["reports"][0]["metrics"] == {"loss": 0.25}


def test_early_exit_400_is_only_a_warning(caplog):
    session = RecordingSession(fail_with=APIError(400, "early exit already reported"))
    train = make_train(session)
    train.report_early_exit("EXITED_REASON_INVALID_HP")
    assert "early exit was not recorded" in caplog.text
    session.fail_with = APIError(500, "down")
    with pytest.raises(APIError):
        train.report_early_exit("EXITED_REASON_INVALID_HP")


class PreemptSession:
    """Answers preemption polls from a script; remembers every call."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.polls = []
        self.posts = []

    def get(self, path, params=None, **kw):
        self.polls.append(params["timeout_seconds"])
        answer = self.answers.pop(0) if self.answers else {"preempt": False}
        if isinstance(answer, Exception):
            raise answer
        if not self.answers:
            time.sleep(0.05)
        return answer

    def post(self, path, body=None, **kw):
        self.posts.append(path)
        return {}


def test_preemption_watcher_first_polls_with_zero_then_long_polls():
    session = PreemptSession([{"preempt": False}, {"preempt": False}, {"preempt": True}])
    preempt = PreemptContext(
        session, "trial-1.1", DummyDistributedContext(), PreemptMode.WorkersAskChief
    )
    preempt.start()
    wait_until(lambda: preempt.should_preempt(auto_ack=False), 10, "the preemption", 0.01)
    assert preempt.should_preempt(auto_ack=False) is True
    assert session.polls[:3] == [0, 60, 60]
    assert session.posts == []
    assert preempt.should_preempt() is True
    assert preempt.should_preempt() is True
    assert session.posts == ["/allocations/trial-1.1/signals/ack_preemption"]  # acked once
    preempt.close()


def test_preemption_watcher_survives_errors():
    session = PreemptSession([APIError(0, "master restarting"), {"preempt": True}])
    preempt = PreemptContext(session, "a", DummyDistributedContext(), retry_after_error_s=0.01)
    preempt.start()
    assert preempt.should_preempt(auto_ack=False) is False  # the error counts as "not preempted"
    wait_until(lambda: preempt.should_preempt(auto_ack=False), 10, "the preemption", 0.01)
    assert preempt.should_preempt(auto_ack=False) is True
    preempt.close()


def test_chief_only_mode_rejects_workers():
    class Rank1(DummyDistributedContext):
        def __init__(self):
            super().__init__()
            self.rank = 1

    preempt = PreemptContext(PreemptSession([]), "a", Rank1(), PreemptMode.ChiefOnly)
    preempt.start()
    with pytest.raises(RuntimeError, match="ChiefOnly"):
        preempt.should_preempt()


def test_nan_metrics_are_shipped():
    session = RecordingSession()
    train = make_train(session)
    train._start()
    train.report_training_metrics(steps_completed=1, metrics={"loss": float("nan")})
    train._close()
    assert math.isnan(session.posts[0][1]["reports"][0]["metrics"]["loss"])


def test_queue_is_bounded_and_the_caller_waits_for_room():
    gate = threading.Event()
    session = RecordingSession(gate=gate)
    train = make_train(session)
    train._start()
    shipper = train._shipper
    train.report_training_metrics(steps_completed=0, metrics={"x": 0})
    assert session.entered.wait(10)  # the shipper is now stuck in its first POST

    def report_many():
        for step in range(1, 1101):
            train.report_training_metrics(steps_completed=step, metrics={"x": step})

    caller = threading.Thread(target=report_many)
    caller.start()
    # A deadline, not a speed: alone this takes 0.1 s, but a loaded CI worker once needed > 10 s.
    wait_until(lambda: len(shipper._pending) >= 1000, 120, "a full queue", 0.01)
    assert len(shipper._pending) == 1000  # full
    assert caller.is_alive()  # so the caller waits for room instead of growing the queue
    gate.set()
    caller.join(120)
    train._close()
    reports = [
        r for path, body in session.posts if path == "/trials/5/metrics" for r in body["reports"]
    ]
    assert [r["steps_completed"] for r in reports] == list(range(0, 1101))
