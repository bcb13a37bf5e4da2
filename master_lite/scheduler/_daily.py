"""Slot-hours per user per day (docs/scheduling.md, "Slot-hours per day"): how many slot-seconds
each user's runs held in the rolling last 24 hours, and, for a user over their limit, the
earliest moment they may run again. Pure: the caller reads the allocation history from the
store and puts the answer into the policy (`Policy.over_daily`), which holds that user's
waiting requests back with a reason naming that moment.

A run still going counts up to now; the moment a user may run again assumes their running runs
end now (a lower bound: it is computed again at every scheduling pass). A user over the limit
keeps their running runs (nothing is preempted for it); their new requests wait.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

DAY_SECONDS = 86_400.0

# (user, start, end or None while it runs, slots): one allocation of the history.
Interval = tuple[str, float, "float | None", int]


def slot_seconds(intervals: Iterable[tuple[float, float, int]], since: float) -> float:
    """Slot-seconds of `(start, end, slots)` intervals after `since`."""
    return sum(slots * max(0.0, end - max(start, since)) for start, end, slots in intervals)


def may_run_at(intervals: list[tuple[float, float, int]], limit: float, now: float) -> float:
    """The earliest moment t >= now when the slot-seconds in (t - 24 h, now] fall below `limit`
    (nothing more running after now)."""
    if slot_seconds(intervals, now - DAY_SECONDS) < limit:
        return now
    # The usage falls as the window slides past the history: the answer is in [now, now + 24 h].
    low, high = now, now + DAY_SECONDS
    for _ in range(60):  # well below a second's precision
        middle = (low + high) / 2
        if slot_seconds(intervals, middle - DAY_SECONDS) < limit:
            high = middle
        else:
            low = middle
    return high


def over_daily_limit(
    history: Iterable[Interval],
    limit_of: Mapping[str, float | None] | None,
    default_limit: float | None,
    now: float,
) -> dict[str, tuple[float, float]]:
    """The users at or over their slot-hours limit: user -> (slot-hours used in the last 24 h,
    the moment they may run again). `limit_of` overrides `default_limit` (slot-hours) per
    user."""
    per_user: dict[str, list[tuple[float, float, int]]] = {}
    for user, start, end, slots in history:
        per_user.setdefault(user, []).append((start, now if end is None else end, slots))
    over: dict[str, tuple[float, float]] = {}
    for user, intervals in per_user.items():
        limit = (limit_of or {}).get(user, default_limit)
        if limit is None:
            continue
        used = slot_seconds(intervals, now - DAY_SECONDS)
        if used >= limit * 3600.0:
            over[user] = (used / 3600.0, may_run_at(intervals, limit * 3600.0, now))
    return over


__all__ = ["DAY_SECONDS", "may_run_at", "over_daily_limit", "slot_seconds"]
