"""Per-call cost of `core_context.train.report_training_metrics` in the training thread.

Workload: 100,000 calls with a small metrics dict (`{"loss": float, "accuracy": float}`), logging
at the default WARNING level, through the real TrainContext and MetricsShipper. The shipper thread
JSON-encodes each batch (as it does for the master), but the "POST" goes nowhere, so this measures the
harness, not the network. Target: < 20 µs per call.

Ideal: the least work any asynchronous reporter must do in the caller's thread — copy the dict
and put one tuple on a queue.Queue — measured in the same process as the baseline.
Run: PYTHONPATH=harness python bench/bench_report_metrics.py
"""
from __future__ import annotations

import queue
import threading
import time

from determined.core._metrics import MetricsShipper
from determined.core._tensorboard import TensorboardManager, TensorboardMode
from determined.core._train import TrainContext

CALLS = 100_000


class EncodingSession:
    """Receives the shipper's encoded POST bodies and drops them (no network)."""

    def __init__(self) -> None:
        self.reports = 0

    def request(self, method: str, path: str, data: bytes = b"", **kw: object) -> None:
        # The shipper has already encoded the body; count what arrived.
        self.reports += data.count(b'"group"')


def measure_report_metrics() -> float:
    session = EncodingSession()
    shipper = MetricsShipper(session, trial_id=1, trial_run_id=1)
    train = TrainContext(session, 1, 1, 1, shipper, TensorboardManager(TensorboardMode.AUTO, None, 1, 1))
    train._start()
    start = time.perf_counter()
    for step in range(CALLS):
        train.report_training_metrics(steps_completed=step, metrics={"loss": 0.5, "accuracy": 0.9})
    elapsed = time.perf_counter() - start
    train._close()
    assert session.reports == CALLS, f"only {session.reports} of {CALLS} reports were shipped"
    return elapsed / CALLS


def measure_ideal() -> float:
    q: queue.Queue = queue.Queue(maxsize=1000)

    def consume() -> None:
        while q.get() is not None:
            pass

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    start = time.perf_counter()
    for step in range(CALLS):
        metrics = {"loss": 0.5, "accuracy": 0.9}
        q.put(("training", step, dict(metrics)))
    elapsed = time.perf_counter() - start
    q.put(None)
    consumer.join()
    return elapsed / CALLS


def main() -> None:
    ideal = measure_ideal()
    measured = measure_report_metrics()
    print(f"report_training_metrics: measured {measured * 1e6:.2f} µs/call, ideal {ideal * 1e6:.2f} µs/call, "
          f"ratio {measured / ideal:.2f} (target < 20 µs/call: {'OK' if measured < 20e-6 else 'MISSED'})")


if __name__ == "__main__":
    main()
