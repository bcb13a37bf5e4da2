"""Bounded memory per client (issue 26, row 11): one stalled `/events` client and many large log
lines, against a real master in this process.

The client sends its request, reads the stream's first line and then stops reading (a browser
tab frozen by the debugger, a proxy that buffers). The run posts 1 MB log lines. The master's
memory for that client is its subscription's queue: the test reads the queue's own byte
accounting after every event (not the process's RSS, which the allocator blurs), and it never
passes `EVENT_QUEUE_BYTES`; once the client is that far behind it is dropped, its queue freed.
When the client reads again it gets an `overflow` event naming why, then the end of the
stream. Every stored line is cut at `MAX_LOG_LINE_BYTES` with a visible marker, and a log POST
over `MAX_LOG_POST_BYTES` is a 413.
"""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.parse

import pytest
import requests

from master_lite import MasterLite
from master_lite._core import _limits
from master_lite._core._events import Subscription

pytestmark = pytest.mark.slow

GUARD_SECONDS = 60  # a hung test fails after this; nothing is timed against it
LINE = "x" * 1_000_000  # 1 MB, as in the issue
LINES_PER_POST = 5  # 5 MB bodies: under MAX_LOG_POST_BYTES
MAX_POSTS = 100  # 500 lines: far more than the budget and every socket buffer hold


def test_a_stalled_events_client_is_dropped_within_its_byte_budget(tmp_path, monkeypatch):
    most_queued = [0]
    deliver = Subscription._deliver

    def accounting(subscription: Subscription, *args: object) -> None:
        deliver(subscription, *args)
        most_queued[0] = max(most_queued[0], subscription.queued_bytes)

    monkeypatch.setattr(Subscription, "_deliver", accounting)
    app = MasterLite(root_dir=str(tmp_path / "root"), port=0, cpu_slots=1)
    outcome: dict = {}

    async def scenario() -> None:
        url = await app.start()
        user = {"Authorization": f"Bearer {app.master.user_token}"}
        try:
            opened = await asyncio.to_thread(
                requests.post,
                f"{url}/api/v1/unmanaged/runs",
                json={"name": "chatty"},
                headers=user,
                timeout=GUARD_SECONDS,
            )
            run = opened.json()
            trial = {"Authorization": f"Bearer {run['token']}"}
            logs_url = f"{url}/api/v1/unmanaged/trials/{run['trial_id']}/logs"

            # The stalled client: a small receive buffer, and it reads nothing after the start.
            parsed = urllib.parse.urlsplit(url)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (parsed.hostname, parsed.port))
            reader, writer = await asyncio.open_connection(sock=sock)
            writer.write(
                f"GET {parsed.path}/api/v1/events?types=log HTTP/1.1\r\nHost: localhost\r\n"
                f"Authorization: Bearer {app.master.user_token}\r\n\r\n".encode()
            )
            received = b""
            while b": connected" not in received:
                received += await asyncio.wait_for(reader.read(4096), GUARD_SECONDS)
            [subscription] = app.master.events._subscriptions

            posts = 0
            while subscription.overflow is None and posts < MAX_POSTS:
                answer = await asyncio.to_thread(
                    requests.post,
                    logs_url,
                    json={"logs": [{"line": LINE}] * LINES_PER_POST},
                    headers=trial,
                    timeout=GUARD_SECONDS,
                )
                assert answer.status_code == 200, answer.text[:300]
                posts += 1
            outcome["posts"] = posts
            outcome["overflow"] = subscription.overflow
            outcome["left_queued"] = subscription.queued_bytes
            outcome["still_subscribed"] = subscription in app.master.events._subscriptions

            # The client reads again: the drop's reason, then the end of the (chunked) stream.
            while b"event: overflow" not in received or not received.endswith(b"0\r\n\r\n"):
                chunk = await asyncio.wait_for(reader.read(1 << 20), GUARD_SECONDS)
                if not chunk:
                    break
                received += chunk
            writer.close()
            outcome["stream"] = received

            too_big = {"logs": [{"line": "y" * (_limits.MAX_LOG_POST_BYTES // 4)}] * 5}
            rejected = await asyncio.to_thread(
                requests.post, logs_url, json=too_big, headers=trial, timeout=GUARD_SECONDS
            )
            outcome["too_big"] = (rejected.status_code, rejected.json()["message"])
            stored = await asyncio.to_thread(
                requests.get,
                f"{url}/api/v1/trials/{run['trial_id']}/logs",
                params={"stream": "stdout", "tail": "3"},
                headers=user,
                timeout=GUARD_SECONDS,
            )
            outcome["stored"] = [entry["line"] for entry in stored.json()["logs"]]
        finally:
            await app.stop()

    asyncio.run(asyncio.wait_for(scenario(), 10 * GUARD_SECONDS))

    # Dropped before the run stopped posting, and its queue never held more than the budget.
    assert outcome["overflow"] is not None, f"not dropped after {outcome['posts']} posts"
    assert 0 < most_queued[0] <= _limits.EVENT_QUEUE_BYTES
    assert outcome["left_queued"] == 0 and not outcome["still_subscribed"]
    assert f"more than {_limits.EVENT_QUEUE_BYTES} bytes" in outcome["overflow"]

    stream = outcome["stream"].decode()
    data = stream.split("event: overflow\r\ndata: ")[-1].split("event: overflow\ndata: ")[-1]
    reason = json.loads(data.split("\n", 1)[0])["reason"]
    assert reason == outcome["overflow"] and "reconnect" in reason

    status, message = outcome["too_big"]
    assert status == 413 and str(_limits.MAX_LOG_POST_BYTES) in message

    assert len(outcome["stored"]) == 3
    for line in outcome["stored"]:
        assert line.startswith("x" * 1000)
        assert len(line.encode()) < _limits.MAX_LOG_LINE_BYTES + 200
        assert line.endswith(
            f"[line truncated: {len(LINE)} bytes, over the {_limits.MAX_LOG_LINE_BYTES}-byte "
            "limit of a log line]"
        )
