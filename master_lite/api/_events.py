"""Server-sent events: live experiment/trial/metric/log/checkpoint updates."""

from __future__ import annotations

from typing import Any

from tornado.iostream import StreamClosedError

from master_lite._core import strict_dumps
from master_lite.api._base import ApiHandlerMixin, json_default
from master_lite.api._reads import event_filter


def format_event(event_type: str, payload: Any) -> str:
    # json.dumps never emits a raw newline, so one `data:` line always suffices; strict JSON
    # (a NaN metric as "NaN"), as every answer, so the sidebar's JSON.parse never fails.
    return f"event: {event_type}\ndata: {strict_dumps(payload, default=json_default)}\n\n"


class EventsHandler(ApiHandlerMixin):
    # Proxies and browsers drop idle streams; a comment line every 15 s keeps them open.
    KEEPALIVE_SECONDS = 15.0

    _subscription: Any = None

    async def get(self) -> None:
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")  # nginx: do not buffer the stream
        subscription = self.master.events.subscribe(
            experiment_id=self.args["experiment_id"],
            trial_id=self.args["trial_id"],
            types=self.args["types"] or None,
            # read_access "own": only events of what this user may read.
            visible=event_filter(self.master, self.principal),
        )
        self._subscription = subscription
        try:
            # Send the headers now, so EventSource sees the stream open before the first event.
            self.write(": connected\n\n")
            await self.flush()
            while not subscription.closed:
                event = await subscription.get_encoded(timeout=self.KEEPALIVE_SECONDS)
                if event is None:
                    if subscription.closed:
                        break
                    self.write(": keepalive\n\n")
                else:
                    self.write(f"event: {event[0]}\ndata: {event[1]}\n\n")
                await self.flush()
            if subscription.overflow is not None:
                # Fell behind past its byte budget: say why, then end (EventSource reconnects).
                self.write(format_event("overflow", {"reason": subscription.overflow}))
                await self.flush()
        except StreamClosedError:
            pass  # the client went away mid-write
        finally:
            subscription.close()
        if not self._finished:
            self.finish()

    def on_connection_close(self) -> None:
        if self._subscription is not None:
            self._subscription.close()
        super().on_connection_close()
