"""The /events fan-out's memory per consumer (issue 26, row 11): each subscription's queue is
bounded in bytes of encoded events, and a consumer that falls behind past that is dropped with
a reason, its queue freed; the others keep theirs."""

from __future__ import annotations

import asyncio
import json

from master_lite._core._events import EventBus


def test_a_consumer_past_its_byte_budget_is_dropped_with_a_reason_and_its_queue_freed():
    async def body() -> None:
        bus = EventBus(queue_bytes=10_000)
        bus.attach(asyncio.get_running_loop())
        stalled = bus.subscribe(types=["log"])
        reading = bus.subscribe(types=["log"])
        line = "z" * 1000
        for index in range(30):
            bus.publish("log", {"id": index, "trial_id": 1, "line": line})
            assert stalled.queued_bytes <= 10_000
            # The reader keeps up: it gets every event, encoded as the stream sends it.
            event = await reading.get_encoded(timeout=5)
            assert event is not None
            event_type, text = event
            assert event_type == "log" and json.loads(text)["id"] == index
            assert reading.queued_bytes == 0
        assert stalled.closed and stalled.queued_bytes == 0
        assert stalled.overflow is not None and "more than 10000 bytes" in stalled.overflow
        assert await stalled.get(timeout=0.01) is None  # nothing left to read: it ended
        assert not reading.closed and reading.overflow is None
        assert bus._subscriptions == [reading]

    asyncio.run(asyncio.wait_for(body(), 30))


def test_events_within_the_budget_are_all_kept_and_accounted():
    async def body() -> None:
        bus = EventBus(queue_bytes=100_000)
        bus.attach(asyncio.get_running_loop())
        subscription = bus.subscribe()
        texts = []
        for index in range(10):
            payload = {"id": index, "trial_id": 2, "line": "ok"}
            bus.publish("log", payload)
            texts.append(json.dumps(payload))
        assert subscription.queued_bytes == sum(map(len, texts))
        got = [await subscription.get(timeout=5) for _ in range(10)]
        assert [event[1]["id"] for event in got if event is not None] == list(range(10))
        assert subscription.queued_bytes == 0 and subscription.overflow is None

    asyncio.run(asyncio.wait_for(body(), 30))
