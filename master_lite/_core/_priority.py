"""Reads a person waits for go before report ingestion.

The API's reads run in the store's read pool, beside the event loop's writes (store/_reads.py).
On a small machine that is a race for the cores: sixteen trials reporting every 10 ms keep the
loop and their own processes busy, and a curve read that takes 70 ms alone took 300-500 ms
under them (issue 26, row 17). A report is background work: the harness ships it from its own
thread or courier process and spools what it cannot send, so nobody waits on its answer. A read
is what a user looks at.

So while reads are in flight, a report's handler waits (at most `hold_seconds`) before it
stores the report: the trials' requests wait for their answers, their processes sleep, and the
read gets the cores. Nothing is dropped or reordered (a trial sends its reports one after the
other), and the bound keeps ingestion going under a steady stream of reads. Reads never wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

# A report waits at most this long for the reads in flight. Long enough for a curve or list
# read of thousands of rows (100-300 ms on two loaded cores), short next to a trial's lease.
REPORT_HOLD_SECONDS = 0.25


class ReadPriority:
    """Counts the reads in flight; `before_report()` waits until there are none (bounded).

    Used on the event loop thread only (no lock: the loop runs one callback at a time)."""

    def __init__(self, hold_seconds: float = REPORT_HOLD_SECONDS) -> None:
        if hold_seconds < 0:
            raise ValueError(f"hold_seconds: expected >= 0, got {hold_seconds}")
        self.hold_seconds = hold_seconds
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def reads_in_flight(self) -> int:
        """How many reads are under way now."""
        return self._in_flight

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Around one read: reports wait while any is in flight."""
        self._in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    async def before_report(self) -> None:
        """Return when no read is in flight, or after `hold_seconds` at most."""
        if not self._in_flight or not self.hold_seconds:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._idle.wait(), self.hold_seconds)
