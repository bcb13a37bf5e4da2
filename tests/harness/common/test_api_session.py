"""`determined.common.api.Session`: requests is loaded by the first request, not by the import
(a trial's first request is made off its main thread), with the same errors as before."""

import http.server
import json
import os
import socket
import subprocess
import sys
import threading

import pytest

from determined.common.api import APIError, NotFound, Session

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_importing_the_api_and_core_does_not_load_requests():
    code = (
        "import sys, determined.common.api, determined.core\n"
        "s = determined.common.api.Session('http://127.0.0.1:1', 'tok')\n"
        "print('requests' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "harness"), ROOT]))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the master's server does
    connections: set = set()

    def do_GET(self):
        status = 404 if self.path.startswith("/api/v1/missing") else 200
        body = json.dumps(
            {"auth": self.headers.get("Authorization"), "message": "no such thing"}
        ).encode()
        self._answer(status, body)

    def do_POST(self):
        _Handler.connections.add(self.client_address)
        received = self.rfile.read(int(self.headers["Content-Length"]))
        status = 404 if self.path.startswith("/api/v1/missing") else 200
        body = json.dumps(
            {
                "auth": self.headers.get("Authorization"),
                "message": "no such thing",
                "type": self.headers.get("Content-Type"),
                "received": json.loads(received),
            }
        ).encode()
        self._answer(status, body)

    def _answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_token_and_errors_on_the_first_request(server):
    session = Session(server, "secret")
    assert session.get("/things")["auth"] == "Bearer secret"
    with pytest.raises(NotFound) as info:
        session.get("/missing")
    assert info.value.status == 404 and info.value.message == "no such thing"
    session.close()
    Session(server, None).close()  # closing a session that never made a request


def test_unreachable_master_is_an_api_error_with_status_0():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    session = Session(f"http://127.0.0.1:{port}", None, connect_retries=1)
    with pytest.raises(APIError) as info:
        session.get("/master")
    assert info.value.status == 0 and f"127.0.0.1:{port}" in str(info.value)


def test_pre_encoded_posts_keep_the_connection_headers_and_errors(server):
    """Pre-encoded bodies (the metrics shipper's) take urllib3 directly: same answers, same
    error types, one kept-alive connection."""
    from determined.core._metrics import post_json

    _Handler.connections.clear()
    session = Session(server, "secret")
    for step in range(5):
        answer = session.request(
            "POST",
            "/trials/1/metrics",
            data=json.dumps({"step": step}).encode(),
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        assert answer.json() == {
            "auth": "Bearer secret",
            "message": "no such thing",
            "type": "application/json",
            "received": {"step": step},
        }
    assert len(_Handler.connections) == 1
    assert session._pool is not None  # the fast path was the one taken
    with pytest.raises(NotFound) as info:
        post_json(session, "/missing", {"reports": []})
    assert info.value.status == 404 and info.value.message == "no such thing"
    session.close()


def test_a_pre_encoded_post_to_a_dead_master_is_an_api_error_after_retries():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    session = Session(f"http://127.0.0.1:{port}", "tok", connect_retries=1)
    with pytest.raises(APIError) as info:
        session.request("POST", "/trials/1/metrics", data=b"{}")
    assert info.value.status == 0 and f"127.0.0.1:{port}" in info.value.message


def test_a_body_with_nan_is_sent_not_refused(server):
    """requests' json= refuses NaN (allow_nan=False): a diverged searcher metric
    (`op.report_completed(float("nan"))`) is still sent, as Python's tokens the master reads."""
    import math

    session = Session(server, "secret")
    answer = session.post("/trials/1/searcher/completed_operation", {"searcherMetric": math.nan})
    assert answer["type"] == "application/json"
    assert math.isnan(answer["received"]["searcherMetric"])
    session.close()
