"""The one polling loop of the test suite."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = 120,
    what: str = "a condition",
    interval: float = 0.2,
    *,
    details: Callable[[], str] | None = None,
) -> T:
    """Call `predicate` until it returns something truthy, and return that value.

    Args:
        predicate: called with no arguments, every `interval` seconds.
        timeout: seconds before giving up.
        what: what is awaited, for the failure message ("the trial to pause").
        interval: seconds between calls.
        details: called once on timeout; its text (logs, say) is appended to the failure.

    Raises:
        AssertionError: `predicate` stayed falsy for `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            message = f"timed out after {timeout} s waiting for {what}"
            if details is not None:
                message += "\n" + details()
            raise AssertionError(message)
        time.sleep(interval)


async def wait_until_async(
    predicate: Callable[[], Awaitable[T | None] | T | None],
    timeout: float = 120,
    what: str = "a condition",
    interval: float = 0.2,
    *,
    details: Callable[[], str] | None = None,
) -> T:
    """`wait_until` inside an event loop: sleeps with asyncio, so in-process servers keep running.

    `predicate` may be a plain function or return an awaitable (a coroutine function).
    Args and errors as for `wait_until`.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            message = f"timed out after {timeout} s waiting for {what}"
            if details is not None:
                message += "\n" + details()
            raise AssertionError(message)
        await asyncio.sleep(interval)
