"""Sign-in hygiene: how long a session lasts, and how many wrong passwords are tolerated.

A session (`det user login`) lasts `MasterLite.session_lifetime_hours` (default 7 days, as
Determined's sessions expire too); after that its token answers 401 saying it expired and to
sign in again. Wrong passwords are counted per username and per client address: after
`MAX_FAILURES` in `FAILURE_WINDOW_SECONDS` further sign-ins of that name, or from that address,
are refused with 429 and Retry-After until the oldest failure leaves the window, even with the
right password (otherwise guessing would go on). A right password clears its username's count.
The clock is injected (`clock`), so tests move time instead of waiting.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable

from master_lite import errors

SESSION_LIFETIME_HOURS = 7 * 24.0
MAX_FAILURES = 10
FAILURE_WINDOW_SECONDS = 300.0
# Failures are remembered for this many names and addresses at most (the oldest are
# forgotten first), so guesses at random names cannot grow the master's memory.
MAX_TRACKED = 10_000


def describe_hours(hours: float) -> str:
    """`168` -> "7 days", `2` -> "2 hours", `0.5` -> "30 minutes"."""
    if hours >= 24 and hours % 24 == 0:
        days = int(hours // 24)
        return f"{days} day{'s' if days != 1 else ''}"
    if hours >= 1 and hours == int(hours):
        return f"{int(hours)} hour{'s' if hours != 1 else ''}"
    minutes = round(hours * 60, 2)
    return f"{minutes:g} minute{'s' if minutes != 1 else ''}"


def _wait_text(seconds: int) -> str:
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


class SignInGuard:
    """Counts failed sign-ins per username and per client address; `check` refuses (429)
    while either has `max_failures` within `window_seconds`."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        *,
        max_failures: int = MAX_FAILURES,
        window_seconds: float = FAILURE_WINDOW_SECONDS,
    ) -> None:
        self.clock = clock
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self._failures: collections.OrderedDict[tuple[str, str], collections.deque[float]] = (
            collections.OrderedDict()
        )

    @staticmethod
    def _keys(username: str, address: str | None) -> list[tuple[str, str]]:
        keys = [("user", username)]
        if address:
            keys.append(("address", address))
        return keys

    def _recent(self, key: tuple[str, str], now: float) -> collections.deque[float]:
        times = self._failures.get(key)
        if times is None:
            return collections.deque()
        while times and times[0] <= now - self.window_seconds:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def check(self, username: str, address: str | None) -> None:
        """TooManyRequests when `username` or `address` failed too often of late."""
        now = self.clock()
        for kind, value in self._keys(username, address):
            times = self._recent((kind, value), now)
            if len(times) < self.max_failures:
                continue
            wait = max(1, math.ceil(times[0] + self.window_seconds - now))
            who = f"user {value!r}" if kind == "user" else f"client address {value}"
            window = describe_hours(self.window_seconds / 3600)
            raise errors.TooManyRequests(
                f"too many failed sign-ins for {who} ({len(times)} in the last {window}): "
                f"try again in {_wait_text(wait)}, at "
                f"{time.strftime('%H:%M:%S UTC', time.gmtime(now + wait))}",
                retry_after=wait,
            )

    def failed(self, username: str, address: str | None) -> None:
        """Count a wrong username or password."""
        now = self.clock()
        for key in self._keys(username, address):
            times = self._recent(key, now)
            times.append(now)
            self._failures[key] = times
            self._failures.move_to_end(key)
        while len(self._failures) > MAX_TRACKED:
            self._failures.popitem(last=False)

    def succeeded(self, username: str) -> None:
        """A right password: that name's failures are forgiven (not its address's)."""
        self._failures.pop(("user", username), None)


__all__ = ["FAILURE_WINDOW_SECONDS", "MAX_FAILURES", "SESSION_LIFETIME_HOURS", "SignInGuard"]
