"""The report courier: a child process that posts a trial's reports (core/_courier.py).

A small HTTP server stands in for the master here (it records what was posted and can hold or
fail requests); the courier, its child process and the pipe between them are the real ones.
test_core_e2e.py runs the same path through a real master.
"""

import http.server
import json
import os
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from determined.core import _courier
from determined.core._courier import CourierCheckpointReporter, CourierGone, ReportCourier
from tests._support import wait_until

ROOT = pathlib.Path(__file__).resolve().parents[3]


class FakeMaster(http.server.ThreadingHTTPServer):
    """Records every POST (path, parsed body, Authorization) in arrival order; `tls`: a
    (certificate, key) pair to serve HTTPS with."""

    daemon_threads = True

    def __init__(self, port: int = 0, tls: tuple | None = None) -> None:
        self.scheme = "https" if tls else "http"
        self.posts: list = []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        self.held = threading.Event()  # set once a POST waits at the closed gate
        self.fail: dict = {}  # path suffix -> (status, body)
        super().__init__(("127.0.0.1", port), _Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.socket = context.wrap_socket(self.socket, server_side=True)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"

    def bodies(self, suffix: str) -> list:
        with self.lock:
            return [body for path, body, _ in self.posts if path.endswith(suffix)]

    def reports(self) -> list:
        return [report for body in self.bodies("/metrics") for report in body["reports"]]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the master answers

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        master: FakeMaster = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not master.gate.is_set():
            master.held.set()
            master.gate.wait(30)
        status, answer = 200, {}
        for suffix, failure in master.fail.items():
            if self.path.endswith(suffix):
                status, answer = failure
        if status < 400:
            with master.lock:
                master.posts.append((self.path, body, self.headers.get("Authorization")))
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def master():
    server = FakeMaster()
    yield server
    server.gate.set()
    server.shutdown()
    server.server_close()


def training(step, value=None):
    return (
        "training",
        step,
        {"loss": value if value is not None else step / 10},
        None,
        time.time(),
    )


def test_reports_reach_the_master_in_order_with_the_token_and_run_id(master):
    courier = ReportCourier(master.url, "secret-token", trial_id=7, trial_run_id=3)
    for step in range(1, 101):
        courier.put(training(step))
    courier.put(("validation", 100, {"accuracy": 0.9}, None, time.time()))
    courier.put(("__progress__", 0.5))
    courier.close()
    reports = master.reports()
    assert [(r["group"], r["steps_completed"]) for r in reports] == (
        [("training", s) for s in range(1, 101)] + [("validation", 100)]
    )
    assert reports[0]["metrics"] == {"loss": 0.1}
    assert {r["trial_run_id"] for r in reports} == {3}
    assert all(r["report_time"].endswith("Z") for r in reports)
    assert all(path.startswith("/api/v1/trials/7/") for path, _, _ in master.posts)
    assert {auth for _, _, auth in master.posts} == {"Bearer secret-token"}
    # The progress report goes after the metrics that preceded it.
    assert master.posts[-1][0] == "/api/v1/trials/7/progress"
    assert master.posts[-1][1] == {"progress": 0.5, "is_raw": True}


def test_reports_made_while_a_post_is_in_flight_go_out_together(master):
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    master.gate.clear()
    courier.put(training(1))
    assert master.held.wait(30)  # the first POST is at the master, held
    for step in range(2, 52):
        courier.put(training(step))
    master.gate.set()
    courier.close()
    batches = [len(body["reports"]) for body in master.bodies("/metrics")]
    assert sum(batches) == 51
    assert len(batches) <= 3 and batches[0] == 1  # the 50 queued meanwhile did not go one by one


def test_a_report_with_nothing_after_it_still_goes_out(master):
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    courier.put(training(1))  # goes to the child at once (nothing was sent for an interval)
    courier.put(training(2))  # queued: the training thread sends at most once per interval
    wait_until(lambda: len(master.reports()) >= 2, 30, "two reports", 0.01)
    assert [r["steps_completed"] for r in master.reports()] == [1, 2]  # before close()
    courier.close()


def test_flush_returns_once_everything_before_it_is_stored(master):
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    reporter = CourierCheckpointReporter(courier)
    for step in range(1, 11):
        courier.put(training(step))
    reporter.submit(
        "uuid-1", json.dumps({"uuid": "uuid-1", "metadata": {"steps_completed": 10}}).encode()
    )
    reporter.flush()
    assert len(master.reports()) == 10
    assert master.bodies("/checkpoints") == [
        {"uuid": "uuid-1", "metadata": {"steps_completed": 10}}
    ]
    # The checkpoint record went after the reports made before it.
    assert master.posts[-1][0] == "/api/v1/checkpoints"
    courier.close()


def test_values_json_cannot_hold_fail_at_the_report_call(master):
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        courier.put(("training", 1, {"loss": object()}, None, time.time()))
    courier.put(
        ("training", 2, {"loss": float("nan")}, None, time.time())
    )  # a diverged loss is a metric
    courier.close()
    assert [r["steps_completed"] for r in master.reports()] == [2]


def test_a_rejected_report_is_raised_by_the_next_report_call(master):
    master.fail["/metrics"] = (
        400,
        {"message": "steps_completed must not decrease", "errors": ["reports[0]"]},
    )
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    courier.put(training(5))
    courier.flush()
    with pytest.raises(
        RuntimeError,
        match="shipping metrics to the master failed: 1 metric report.*"
        "steps_completed must not decrease",
    ):
        courier.put(training(6))
    master.fail.clear()
    courier.put(training(7))  # raised once; the courier goes on
    courier.close()
    assert [r["steps_completed"] for r in master.reports()] == [7]


def test_a_rejected_checkpoint_record_names_the_checkpoint(master):
    master.fail["/checkpoints"] = (500, {"message": "database is full"})
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    reporter = CourierCheckpointReporter(courier)
    reporter.submit("3f2a-uuid", b'{"uuid": "3f2a-uuid"}')
    with pytest.raises(
        RuntimeError,
        match="reporting checkpoint 3f2a-uuid to the master failed: "
        "database is full; its files are in checkpoint storage",
    ):
        reporter.flush()
    reporter.close()  # raised once: closing does not raise it again
    courier.close()  # the metrics side had no failure


def test_close_raises_a_failure_of_the_last_batch(master):
    master.fail["/metrics"] = (403, {"message": "this trial run is over"})
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    courier.put(training(1))
    with pytest.raises(RuntimeError, match="this trial run is over"):
        courier.close()
    with pytest.raises(RuntimeError, match="after core.Context was closed"):
        courier.put(training(2))


def test_the_master_coming_up_late_is_waited_for():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    courier = ReportCourier(f"http://127.0.0.1:{port}", None, trial_id=1, trial_run_id=1)
    courier.put(training(1))  # nothing listens yet: the child retries with a growing pause
    time.sleep(0.5)
    server = FakeMaster(port)
    try:
        courier.close()
        assert [r["steps_completed"] for r in server.reports()] == [1]
    finally:
        server.shutdown()
        server.server_close()


def test_an_unreachable_master_is_a_clear_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    courier = ReportCourier(
        f"http://127.0.0.1:{port}",
        None,
        trial_id=1,
        trial_run_id=1,
        connect_retries=1,
        retry_window_s=0,
    )
    courier.put(training(1))
    with pytest.raises(RuntimeError, match=f"cannot reach the master at http://127.0.0.1:{port}"):
        courier.close()


def test_a_master_down_longer_than_the_retries_is_waited_for_within_the_window():
    # Issue 26 row 12: the courier gave up after its connect retries (~5 s), losing reports a
    # restarting master would have stored. No retries by count here: only the window waits.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    courier = ReportCourier(
        f"http://127.0.0.1:{port}",
        None,
        trial_id=1,
        trial_run_id=1,
        connect_retries=0,
        retry_window_s=60,
    )
    courier.put(("validation", 1, {"loss": 0.1}, None, time.time()))  # written at once
    time.sleep(1.0)  # the outage: the child's first tries are refused
    server = FakeMaster(port)
    try:
        courier.close()
        assert [r["steps_completed"] for r in server.reports()] == [1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_killed_child_is_a_clear_error_at_the_next_report(master):
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    courier.put(training(1))
    courier.flush()
    courier._proc.kill()
    courier._proc.wait()
    wait_until(lambda: courier._gone, 30, "the reader thread to notice", 0.01)
    with pytest.raises(
        RuntimeError,
        match="shipping metrics to the master failed: the report "
        "courier process .* ended unexpectedly .exit code -9",
    ):
        courier.put(training(2))
    with pytest.raises(CourierGone, match="ended unexpectedly"):
        courier.flush()  # a checkpoint would wait for this
    with pytest.raises(RuntimeError, match="exited with code -9"):
        courier.close()


def _run_script(master_url: str, ending: str) -> None:
    script = textwrap.dedent(f"""
        import os, sys, time
        from determined.core._courier import ReportCourier
        courier = ReportCourier({master_url!r}, None, trial_id=1, trial_run_id=1)
        for step in range(1, 201):
            courier.put(("training", step, {{"loss": 1.0}}, None, time.time()))
        {ending}
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "harness")}
    subprocess.run([sys.executable, "-c", script], env=env, check=False, timeout=120)


def test_a_script_that_never_closes_still_delivers_everything(master):
    _run_script(master.url, "sys.exit(0)")
    assert [r["steps_completed"] for r in master.reports()] == list(range(1, 201))


def test_reports_handed_over_before_the_trial_crashed_are_still_delivered(master):
    # A validation report goes to the child at once, with the training reports queued before
    # it. os._exit skips atexit: the child reads the end of the pipe and posts what it has.
    _run_script(
        master.url, 'courier.put(("validation", 200, {"acc": 1.0}, None, time.time())); os._exit(3)'
    )
    wait_until(lambda: len(master.reports()) >= 201, 60, "201 reports", 0.05)
    assert [r["steps_completed"] for r in master.reports()] == list(range(1, 201)) + [200]


def test_ctrl_c_in_the_terminal_does_not_stop_the_child(master):
    courier = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    courier.put(training(1))
    courier.flush()
    os.kill(courier._proc.pid, signal.SIGINT)
    courier.put(training(2))
    courier.close()
    assert [r["steps_completed"] for r in master.reports()] == [1, 2]


def test_a_prestarted_child_is_taken_by_the_first_courier(master):
    _courier.prestart_child()  # what a pre-started trial interpreter does while it waits
    spare = _courier._spare_child
    first = ReportCourier(master.url, None, trial_id=1, trial_run_id=1)
    first.put(training(1))
    second = ReportCourier(master.url, None, trial_id=2, trial_run_id=1)
    second.put(training(2))
    first.close()
    second.close()
    assert first._proc is spare and second._proc is not spare
    assert sorted(r["steps_completed"] for r in master.reports()) == [1, 2]


def test_deliveries_are_counted_for_whoever_asks(master):
    delivered = []
    courier = ReportCourier(
        master.url, None, trial_id=1, trial_run_id=1, on_delivered=delivered.append
    )
    for step in range(1, 31):
        courier.put(training(step))
    courier.close()
    assert delivered and delivered[-1] == 30 and delivered == sorted(delivered)


@pytest.fixture
def tls_master(tmp_path):
    """An HTTPS stand-in with a self-signed certificate for 127.0.0.1."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    server = FakeMaster(tls=(str(cert), str(key)))
    yield server, cert
    server.shutdown()
    server.server_close()


def test_https_trusts_the_ca_bundle_requests_would(tls_master, monkeypatch):
    server, cert = tls_master
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))  # the child inherits the environment
    courier = ReportCourier(server.url, None, trial_id=1, trial_run_id=1)
    courier.put(training(1))
    courier.close()
    assert [r["steps_completed"] for r in server.reports()] == [1]


def test_https_with_an_untrusted_certificate_is_a_clear_error(tls_master, monkeypatch):
    server, _ = tls_master
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    courier = ReportCourier(server.url, None, trial_id=1, trial_run_id=1)  # not retried
    courier.put(training(1))
    with pytest.raises(
        RuntimeError,
        match="cannot reach the master at https://127.0.0.1:.*CERTIFICATE_VERIFY_FAILED",
    ):
        courier.close()
    assert server.reports() == []


def test_the_courier_is_used_unless_a_proxy_or_the_switch_says_otherwise(monkeypatch):
    for name in (
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "no_proxy",
        "NO_PROXY",
        _courier.ENV_SWITCH,
    ):
        monkeypatch.delenv(name, raising=False)
    assert _courier.courier_usable("http://127.0.0.1:8080")
    assert _courier.courier_usable("https://master.example:443")
    assert not _courier.courier_usable("unix:///tmp/master.sock")
    monkeypatch.setenv("http_proxy", "http://proxy.example:3128")
    assert not _courier.courier_usable("http://master.example:8080")
    monkeypatch.setenv("no_proxy", "master.example")
    assert _courier.courier_usable("http://master.example:8080")
    monkeypatch.setenv(_courier.ENV_SWITCH, "0")
    assert not _courier.courier_usable("http://127.0.0.1:8080")
