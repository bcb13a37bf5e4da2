"""Per-call cost of `core_context.train.report_training_metrics` in the training thread.

Workload: 100,000 calls with a small metrics dict (`{"loss": float, "accuracy": float}`), logging
at the default WARNING level, through the real TrainContext and each of the two reporters: the
report courier (`ReportCourier`, what trials on the master use: batches are JSON-encoded in the
training thread and posted by a child process) posting to a minimal HTTP sink in another process,
and the thread-based `MetricsShipper` (used where the courier cannot be), whose "POST" goes nowhere
after encoding. Every report is counted at the receiving end. This measures the harness, not the
master. Target: < 20 µs per call.

Ideal: the least work any asynchronous reporter must do in the caller's thread: copy the dict
and put one tuple on a queue.Queue, measured in the same process as the baseline.
Run: PYTHONPATH=harness python bench/bench_report_metrics.py
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
import urllib.request

from determined.core._courier import ReportCourier
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


SINK = r"""
import http.server, json, sys
count = 0
class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        global count
        count += self.rfile.read(int(self.headers["Content-Length"])).count(b'"group"')
        self.answer(b"{}")
    def do_GET(self):
        self.answer(json.dumps({"reports": count}).encode())
    def answer(self, data):
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def measure_courier() -> float:
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{int(sink.stdout.readline())}"
        courier = ReportCourier(url, None, trial_id=1, trial_run_id=1)
        train = TrainContext(
            None, 1, 1, 1, courier, TensorboardManager(TensorboardMode.AUTO, None, 1, 1)
        )
        train._start()
        train.report_training_metrics(steps_completed=0, metrics={"loss": 0.5})  # starts the child
        start = time.perf_counter()
        for step in range(1, CALLS + 1):
            train.report_training_metrics(
                steps_completed=step, metrics={"loss": 0.5, "accuracy": 0.9}
            )
        elapsed = time.perf_counter() - start
        train._close()
        with urllib.request.urlopen(url) as answer:
            received = json.loads(answer.read())["reports"]
        assert received == CALLS + 1, f"only {received} of {CALLS + 1} reports reached the sink"
    finally:
        sink.kill()
        sink.wait()
    return elapsed / CALLS


def measure_report_metrics() -> float:
    session = EncodingSession()
    shipper = MetricsShipper(session, trial_id=1, trial_run_id=1)
    train = TrainContext(
        session, 1, 1, 1, shipper, TensorboardManager(TensorboardMode.AUTO, None, 1, 1)
    )
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
    for name, measure in (
        ("report courier", measure_courier),
        ("thread shipper", measure_report_metrics),
    ):
        measured = measure()
        print(
            f"report_training_metrics ({name}): measured {measured * 1e6:.2f} µs/call, ideal "
            f"{ideal * 1e6:.2f} µs/call, ratio {measured / ideal:.2f} "
            f"(target < 20 µs/call: {'OK' if measured < 20e-6 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
