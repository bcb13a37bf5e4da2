"""The "acknowledging the preemption signal" log line appears only when the master asked the
trial to stop, not on every normal end (running out of searcher operations also acks)."""

from __future__ import annotations

import logging
import time

import pytest

from determined.core._distributed import DummyDistributedContext
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._searcher import SearcherContext

ACK_LINE = "acknowledging the preemption signal"


class PreemptSession:
    """Answers every preemption poll with `preempt`; records the posts."""

    def __init__(self, preempt: bool) -> None:
        self.preempt = preempt
        self.posts: list[str] = []

    def get(self, path, params=None, **kw):
        if params and params.get("timeout_seconds"):
            time.sleep(0.05)
        return {"preempt": self.preempt}

    def post(self, path, body=None, **kw):
        self.posts.append(path)
        return {}


def started(session: PreemptSession) -> PreemptContext:
    preempt = PreemptContext(
        session, "trial-1.1", DummyDistributedContext(), PreemptMode.WorkersAskChief
    )
    preempt.start()
    return preempt


def test_running_out_of_operations_acks_without_claiming_a_preemption(caplog):
    caplog.set_level(logging.INFO, logger="determined.core")
    session = PreemptSession(preempt=False)
    preempt = started(session)
    assert preempt.should_preempt() is False
    preempt.acknowledge_preemption_signal()  # what SearcherContext calls when out of ops
    assert session.posts == ["/allocations/trial-1.1/signals/ack_preemption"]
    assert ACK_LINE not in caplog.text
    preempt.close()


def test_a_real_preemption_is_logged_once(caplog):
    caplog.set_level(logging.INFO, logger="determined.core")
    session = PreemptSession(preempt=True)
    preempt = started(session)
    assert preempt.should_preempt() is True
    assert preempt.should_preempt() is True
    assert caplog.text.count(ACK_LINE) == 1
    assert session.posts == ["/allocations/trial-1.1/signals/ack_preemption"]
    preempt.close()


def test_the_searcher_context_acks_through_the_preempt_context(caplog):
    """The wiring of `det.core.init()`: out of ops -> preempt.acknowledge_preemption_signal."""
    caplog.set_level(logging.INFO, logger="determined.core")
    session = PreemptSession(preempt=False)
    preempt = started(session)

    class NoOps(SearcherContext):
        def _next_length(self):
            return None

    searcher = NoOps(
        session,
        DummyDistributedContext(),
        1,
        {},
        on_out_of_ops=preempt.acknowledge_preemption_signal,
    )
    assert list(searcher.operations()) == []
    assert session.posts == ["/allocations/trial-1.1/signals/ack_preemption"]
    assert ACK_LINE not in caplog.text
    preempt.close()


CORE_TRIAL = """
import logging
import determined as det

logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
with det.core.init() as core:
    steps = 0
    for op in core.searcher.operations():
        while steps < op.length:
            steps += 1
        core.train.report_validation_metrics(steps_completed=steps, metrics={"loss": 1.0 / steps})
        op.report_completed(1.0 / steps)
print("TRIAL-DONE", flush=True)
"""


@pytest.mark.slow
def test_a_trial_that_ends_normally_logs_no_preemption(tmp_path):
    from tests._support import MasterProcess, context_tarball, wait_for_experiment

    config = {
        "name": "no-preemption",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 3}},
    }
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        exp_id = master.create_experiment(config, context_tarball({"train.py": CORE_TRIAL}))
        experiment = wait_for_experiment(master, exp_id)
        [trial] = master.trials(exp_id)
        logs = "\n".join(master.logs(trial["id"]))
        assert experiment["state"] == "COMPLETED", logs
        assert "TRIAL-DONE" in logs
        assert ACK_LINE not in logs
