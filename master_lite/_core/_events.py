"""In-process publish/subscribe for live updates (SSE, widgets).

Publishers never block: `publish` may be called from any thread (log capture threads do) and
hands the event to the event loop thread. Each event is encoded once (strict JSON, the `data:`
of the SSE stream), and each subscriber's queue is bounded twice, so one stuck browser tab
cannot grow the master's memory: past `EVENT_QUEUE_EVENTS` events its oldest are dropped, and
past `EVENT_QUEUE_BYTES` of encoded events (docs/rest-api.md, "Limits") the subscription is
closed, its queue freed, with `overflow` naming why (the SSE handler sends it, then ends the
stream; the client reconnects and reads what it missed over REST).
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Iterable
from typing import Any

from master_lite._core._limits import EVENT_QUEUE_BYTES, EVENT_QUEUE_EVENTS
from master_lite._core._serialize import dumps, json_default

EVENT_TYPES = ("experiment", "trial", "metric", "log", "checkpoint", "model")
DEFAULT_QUEUE_SIZE = EVENT_QUEUE_EVENTS


def _matches(value: int | None, payload: dict, event_type: str, key: str, own_type: str) -> bool:
    if value is None:
        return True
    if event_type == own_type:
        return payload.get("id") == value
    return payload.get(key) == value


class Subscription:
    """An async iterator of `(type, payload)` for one consumer; `close()` ends it.

    `queued_bytes` is what its queue holds (the encoded size of its events); once it would pass
    `max_bytes` the subscription closes itself and `overflow` says why."""

    def __init__(
        self,
        bus: EventBus,
        *,
        experiment_id: int | None,
        trial_id: int | None,
        types: Iterable[str] | None,
        maxsize: int,
        max_bytes: int = EVENT_QUEUE_BYTES,
        visible: Callable[[str, dict], bool] | None = None,
    ) -> None:
        self._bus = bus
        # Which events its consumer may see at all (a reader narrowed to their own objects).
        self.visible = visible
        self.experiment_id = experiment_id
        self.trial_id = trial_id
        self.types = frozenset(types) if types else None
        self._queue: collections.deque[tuple[str, dict, str]] = collections.deque()
        self._maxsize = maxsize
        self.max_bytes = max_bytes
        self.queued_bytes = 0
        self._wakeup = asyncio.Event()
        self.dropped = 0
        self.closed = False
        self.overflow: str | None = None

    def wants(self, event_type: str, payload: dict) -> bool:
        if self.types is not None and event_type not in self.types:
            return False
        if not _matches(self.experiment_id, payload, event_type, "experiment_id", "experiment"):
            return False
        if not _matches(self.trial_id, payload, event_type, "trial_id", "trial"):
            return False
        return self.visible is None or self.visible(event_type, payload)

    def _deliver(self, event_type: str, payload: dict, text: str) -> None:
        if self.closed:
            return
        if len(self._queue) == self._maxsize:
            self.dropped += 1
            self.queued_bytes -= len(self._queue.popleft()[2])
        if self.queued_bytes + len(text) > self.max_bytes:
            self._overflow(len(text))
            return
        self._queue.append((event_type, payload, text))
        self.queued_bytes += len(text)
        self._wakeup.set()

    def _overflow(self, incoming: int) -> None:
        """The consumer fell too far behind: free its queue and end it, saying why."""
        self.overflow = (
            f"this client fell behind by more than {self.max_bytes} bytes of events "
            f"({len(self._queue)} events, {self.queued_bytes} bytes queued, {incoming} more "
            "arriving): the master dropped the stream; reconnect and read what was missed "
            "over REST (after_id)"
        )
        self._queue.clear()
        self.queued_bytes = 0
        self.close()

    async def _next(self, timeout: float | None) -> tuple[str, dict, str] | None:
        while not self._queue:
            if self.closed:
                return None
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                return None
        item = self._queue.popleft()
        self.queued_bytes -= len(item[2])
        return item

    async def get(self, timeout: float | None = None) -> tuple[str, dict] | None:
        """The next event, or None on timeout or once closed."""
        item = await self._next(timeout)
        return None if item is None else (item[0], item[1])

    async def get_encoded(self, timeout: float | None = None) -> tuple[str, str] | None:
        """The next event as `(type, its strict JSON)`, or None on timeout or once closed."""
        item = await self._next(timeout)
        return None if item is None else (item[0], item[2])

    def get_nowait(self) -> tuple[str, dict] | None:
        if not self._queue:
            return None
        event_type, payload, text = self._queue.popleft()
        self.queued_bytes -= len(text)
        return event_type, payload

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> tuple[str, dict]:
        item = await self.get()
        if item is None:
            raise StopAsyncIteration
        return item

    def close(self) -> None:
        self.closed = True
        self._bus._remove(self)
        self._wakeup.set()


class EventBus:
    def __init__(
        self,
        *,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        queue_bytes: int = EVENT_QUEUE_BYTES,
        experiment_of_trial: Callable[[int], int | None] | None = None,
    ) -> None:
        """`experiment_of_trial` lets `metric`/`log` events, which name only their trial, carry
        their `experiment_id` too, so `subscribe(experiment_id=...)` receives them."""
        self._experiment_of_trial = experiment_of_trial
        self._trial_experiments: dict[int, int] = {}  # a trial never changes experiment
        self._subscriptions: list[Subscription] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._queue_size = queue_size
        self._queue_bytes = queue_bytes

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind to the loop that consumers run on (called by `Master.start`)."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def subscribe(
        self,
        *,
        experiment_id: int | None = None,
        trial_id: int | None = None,
        types: Iterable[str] | None = None,
        visible: Callable[[str, dict], bool] | None = None,
    ) -> Subscription:
        """`visible(type, payload)`: whether this consumer may see an event at all."""
        subscription = Subscription(
            self,
            experiment_id=experiment_id,
            trial_id=trial_id,
            types=types,
            maxsize=self._queue_size,
            max_bytes=self._queue_bytes,
            visible=visible,
        )
        self._subscriptions.append(subscription)
        return subscription

    def _remove(self, subscription: Subscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    def has_subscribers(self, event_type: str) -> bool:
        """Lets hot paths skip building payloads nobody will read."""
        return any(s.types is None or event_type in s.types for s in self._subscriptions)

    def publish(self, event_type: str, payload: dict[str, Any]) -> None:
        loop = self._loop
        if loop is None or threading.get_ident() == self._loop_thread:
            self._dispatch(event_type, payload)
            return
        try:
            loop.call_soon_threadsafe(self._dispatch, event_type, payload)
        except RuntimeError:  # loop closed during shutdown: nobody is listening any more
            pass

    def _dispatch(self, event_type: str, payload: dict) -> None:
        if "experiment_id" not in payload and payload.get("trial_id") is not None:
            experiment_id = self._experiment_id_of(payload["trial_id"])
            if experiment_id is not None:
                payload = {**payload, "experiment_id": experiment_id}
        text = None  # encoded once, for every subscriber that wants it
        for subscription in list(self._subscriptions):
            if subscription.wants(event_type, payload):
                if text is None:
                    text = dumps(payload, default=json_default)
                subscription._deliver(event_type, payload, text)

    def _experiment_id_of(self, trial_id: int) -> int | None:
        cached = self._trial_experiments.get(trial_id)
        if cached is None and self._experiment_of_trial is not None:
            cached = self._experiment_of_trial(trial_id)
            if cached is not None:
                self._trial_experiments[trial_id] = cached
        return cached


__all__ = ["EventBus", "Subscription", "EVENT_TYPES"]
