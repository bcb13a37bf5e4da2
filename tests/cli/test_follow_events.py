"""Following ends when the followed thing ends, not at the event stream's next keepalive.

`det e create -f`, `det t logs -f` and `det e wait` poll the master and read its `/events`
stream only to wake up early. Closing that reader must not wait for the stream's next line:
here the stream sends its headers and then nothing, ever, so a close that waited would hang.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from determined.cli._follow import EventWaker
from determined.common import api
from tests._support import wait_until


class _SilentStream(http.server.BaseHTTPRequestHandler):
    """An `/events` that opens and then says nothing until the test ends."""

    release = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b": connected\n\n")
        self.wfile.flush()
        self.release.wait()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def silent_master() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SilentStream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        _SilentStream.release.set()
        server.shutdown()
        server.server_close()


def test_closing_the_event_reader_ends_its_blocked_read_at_once(
    silent_master: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No read timeout either: only close() can end the read.
    monkeypatch.setattr(EventWaker, "read_timeout", None)
    waker = EventWaker(api.Session(silent_master, "token"), {"types": "trial"}).start()
    wait_until(lambda: waker._response is not None, 30, "the event stream to open")
    waker.close()  # returns at once: it does not wait for the blocked read
    waker.join()  # and the read ends (no line will ever come): a hang here is the bug
