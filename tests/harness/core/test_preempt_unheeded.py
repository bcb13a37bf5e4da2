"""A loop that never asks `should_preempt()` hears once, in its log, that the master wants it
to stop (issue 28 item 1): the quickstart-style loop used to train on silently until killed."""

from __future__ import annotations

import logging
import time

from determined.core._distributed import DummyDistributedContext
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._searcher import SearcherContext
from determined.core._train import TrainContext

NOTE = "does not check core_context.preempt.should_preempt()"


class Session:
    """Answers preemption polls with `preempt` (plus master_lite's reason and grace)."""

    def __init__(self, preempt: bool, reason: str = "pause") -> None:
        self.preempt = preempt
        self.reason = reason
        self.posts: list[str] = []

    def get(self, path, params=None, **kw):
        if params and params.get("timeout_seconds"):
            time.sleep(0.05)
        if path.endswith("/searcher/operation"):
            return {"op": {"validateAfter": {"length": 10}}}
        answer: dict = {"preempt": self.preempt}
        if self.preempt:
            answer.update(reason=self.reason, grace_seconds=30)
        return answer

    def post(self, path, body=None, **kw):
        self.posts.append(path)
        return {}


class Shipper:
    def __init__(self) -> None:
        self.items: list = []

    def put(self, item) -> None:
        self.items.append(item)


class Board:
    def on_metrics(self, *args) -> None:
        pass


def contexts(session: Session) -> tuple[PreemptContext, TrainContext]:
    preempt = PreemptContext(
        session, "trial-1.1", DummyDistributedContext(), PreemptMode.WorkersAskChief
    )
    preempt.start()
    train = TrainContext(session, 1, 1, 1, Shipper(), Board(), on_report=preempt._on_report)  # type: ignore[arg-type]
    return preempt, train


def wait_for_signal(preempt: PreemptContext) -> None:
    deadline = time.monotonic() + 10
    while not preempt._preemption_requested():
        assert time.monotonic() < deadline, "the watcher never saw the preemption"
        time.sleep(0.01)


def test_reports_without_should_preempt_log_the_pending_pause_once(caplog):
    caplog.set_level(logging.INFO, logger="determined.core")
    preempt, train = contexts(Session(preempt=True, reason="pause"))
    wait_for_signal(preempt)
    for step in range(1, 6):
        train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0})
    train.report_progress(0.5)
    assert caplog.text.count(NOTE) == 1
    [line] = [r.getMessage() for r in caplog.records if NOTE in r.getMessage()]
    assert "user pause" in line
    assert "save a checkpoint and exit" in line
    assert "in 30 s" in line
    preempt.close()


def test_master_stopping_is_named_as_the_reason(caplog):
    caplog.set_level(logging.INFO, logger="determined.core")
    preempt, train = contexts(Session(preempt=True, reason="master-stop"))
    wait_for_signal(preempt)
    train.report_validation_metrics(steps_completed=1, metrics={"loss": 1.0})
    assert "(master stopping)" in caplog.text
    preempt.close()


def test_a_loop_that_checks_should_preempt_is_not_nagged(caplog):
    caplog.set_level(logging.INFO, logger="determined.core")
    preempt, train = contexts(Session(preempt=True))
    assert preempt.should_preempt() is True
    train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
    assert NOTE not in caplog.text
    preempt.close()


def test_no_preemption_no_note(caplog):
    caplog.set_level(logging.INFO, logger="determined.core")
    preempt, train = contexts(Session(preempt=False))
    assert preempt.should_preempt() is False  # waits for the first answer
    preempt._ever_checked = False  # as if the loop never asked
    train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
    assert NOTE not in caplog.text
    preempt.close()


def test_searcher_op_reports_note_it_too(caplog):
    caplog.set_level(logging.INFO, logger="determined.core")
    session = Session(preempt=True)
    preempt, _ = contexts(session)
    wait_for_signal(preempt)
    searcher = SearcherContext(
        session, DummyDistributedContext(), 1, {}, on_report=preempt._on_report
    )
    op = next(iter(searcher.operations()))
    op.report_progress(5)
    op.report_progress(6)
    assert caplog.text.count(NOTE) == 1
    preempt.close()
