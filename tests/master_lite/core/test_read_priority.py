"""Reads a person waits for go before report ingestion (issue 26, row 17).

A report's handler waits while reads are in flight, until they end, and never longer than the
hold: ingestion keeps going under a steady stream of reads. The guards only stop a hung test;
nothing here is timed.
"""

from __future__ import annotations

import asyncio

import pytest

from master_lite._core import ReadPriority

GUARD_SECONDS = 30


async def _turns(n: int = 20) -> None:
    """Let the loop run other tasks `n` times (no time passes for them to wait on)."""
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_report_waits_for_the_reads_in_flight_then_goes():
    async def scenario() -> list[str]:
        priority = ReadPriority(hold_seconds=GUARD_SECONDS)
        seen = []
        with priority.reading():
            with priority.reading():
                report = asyncio.ensure_future(priority.before_report())
                await _turns()
                seen.append(f"two reads: report {'stored' if report.done() else 'waits'}")
            await _turns()
            seen.append(f"one read: report {'stored' if report.done() else 'waits'}")
        await asyncio.wait_for(report, GUARD_SECONDS)
        seen.append(f"no read: report stored, {priority.reads_in_flight} in flight")
        return seen

    assert asyncio.run(scenario()) == [
        "two reads: report waits",
        "one read: report waits",
        "no read: report stored, 0 in flight",
    ]


def test_a_report_waits_no_longer_than_the_hold():
    async def scenario() -> bool:
        priority = ReadPriority(hold_seconds=0.01)
        with priority.reading():  # a read that outlasts the hold
            await asyncio.wait_for(priority.before_report(), GUARD_SECONDS)
            return priority.reads_in_flight == 1

    assert asyncio.run(scenario())


def test_a_report_never_waits_without_reads_or_with_no_hold():
    async def scenario() -> list[bool]:
        idle, no_hold = ReadPriority(), ReadPriority(hold_seconds=0)
        first = asyncio.ensure_future(idle.before_report())
        with no_hold.reading():
            second = asyncio.ensure_future(no_hold.before_report())
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            return [first.done(), second.done()]

    assert asyncio.run(scenario()) == [True, True]


def test_a_failed_read_still_ends():
    async def scenario() -> int:
        priority = ReadPriority()
        with pytest.raises(RuntimeError), priority.reading():
            raise RuntimeError("the read failed")
        await asyncio.wait_for(priority.before_report(), GUARD_SECONDS)
        return priority.reads_in_flight

    assert asyncio.run(scenario()) == 0


def test_a_negative_hold_is_refused():
    with pytest.raises(ValueError, match="hold_seconds: expected >= 0, got -1"):
        ReadPriority(hold_seconds=-1)
