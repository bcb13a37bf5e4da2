"""Slot-hours per user per day (docs/scheduling.md, "Slot-hours per day"): the slot-seconds of
the rolling last 24 h from the allocation history, the moment a user over their limit may run
again, the reason their waiting trials give, the settings, and a real master that holds a user
back from their allocation history."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from traitlets import TraitError

from master_lite._app import MasterLite
from master_lite._master import Master
from master_lite.scheduler import DAY_SECONDS, Policy, Request, decide, over_daily_limit
from master_lite.scheduler._daily import may_run_at, slot_seconds
from tests.master_lite.users.test_users_http import serving
from tests.master_lite.workspaces.test_workspaces_http import _submit

NOW = 1_800_000_000.0  # 2027-01-15 08:00 UTC
HOUR = 3600.0


def test_slot_seconds_count_only_the_last_24_hours():
    intervals = [(NOW - 30 * HOUR, NOW - 20 * HOUR, 2), (NOW - HOUR, NOW, 1)]
    # 2 slots for the 4 h after the window opened (NOW - 24 h .. NOW - 20 h), 1 slot for 1 h.
    assert slot_seconds(intervals, NOW - DAY_SECONDS) == 2 * 4 * HOUR + HOUR


def test_a_user_over_the_limit_may_run_again_once_the_window_slid_past_enough_history():
    history = [("alice", NOW - 23 * HOUR, NOW - 21 * HOUR, 2), ("bob", NOW - HOUR, None, 1)]
    over = over_daily_limit(history, {"bob": 5.0}, 3.0, NOW)
    assert set(over) == {"alice"}  # 4 slot-hours of 3; bob holds 1 of his 5
    used, at = over["alice"]
    assert used == pytest.approx(4.0)
    # Below 3 slot-hours once the window starts after NOW - 22.5 h: 1.5 h from now.
    assert at == pytest.approx(NOW + 1.5 * HOUR, abs=1.0)
    assert may_run_at([(NOW - HOUR, NOW, 1)], 2 * HOUR, NOW) == NOW  # under: at once


def test_waiting_requests_of_a_user_over_the_limit_say_when_they_may_run_again():
    policy = Policy(slot_hours_per_day=3.0, over_daily={"alice": (4.0, NOW + 1.5 * HOUR)})
    wants = [
        Request(key="a", user="alice", experiment_id=1, slots=1, order=0),
        Request(key="b", user="bob", experiment_id=2, slots=1, order=1),
    ]
    decision = decide({"default": 4}, [], wants, policy, NOW)
    assert decision.grants == ["b"]
    assert decision.reasons["a"] == (
        "waiting: alice used 4.0 of their 3 slot-hours of the last 24 h; they may run again at "
        "2027-01-15 09:30 UTC"
    )


def test_the_settings_make_the_limits_and_refuse_bad_ones(monkeypatch):
    monkeypatch.setenv("MASTER_LITE_SLOT_HOURS_PER_DAY", "8")
    monkeypatch.setenv("MASTER_LITE_USER_SLOT_HOURS_PER_DAY", '{"alice": 2.5}')
    policy = MasterLite().scheduling_policy()
    assert policy.slot_hours_per_day == 8.0 and policy.user_slot_hours_per_day == {"alice": 2.5}
    assert policy.daily_limit_of("alice") == 2.5 and policy.daily_limit_of("bob") == 8.0
    monkeypatch.setenv("MASTER_LITE_SLOT_HOURS_PER_DAY", "0")
    with pytest.raises(TraitError, match="slot_hours_per_day: must be > 0"):
        MasterLite().scheduling_policy()


@pytest.mark.slow  # a real trial process runs
def test_a_real_master_holds_a_user_back_from_their_allocation_history(tmp_path: Path) -> None:
    async def body() -> None:
        policy = Policy(slot_hours_per_day=1.0, min_run_seconds=0)
        master = Master(tmp_path, cpu_slots=2, gpus=[], scheduling=policy)
        async with serving(master) as api:
            # A first experiment runs (under the limit); its run is then recorded as 2 h long.
            status, first = await _submit(api, activate=True)
            assert status == 201, first
            store = master.store
            deadline = time.monotonic() + 60
            while not store.select_sql("SELECT 1 FROM allocations WHERE end_time IS NOT NULL"):
                assert time.monotonic() < deadline, "the first trial's run did not end"
                await asyncio.sleep(0.05)
            store.execute("UPDATE allocations SET start_time = end_time - 7200")
            status, second = await _submit(api, activate=True)
            assert status == 201, second
            exp_id = second["experiment"]["id"]
            deadline = time.monotonic() + 30
            while True:
                status, answer = await api.call("GET", f"/experiments/{exp_id}/trials")
                reasons = [t.get("wait_reason") for t in answer.get("trials", [])]
                if reasons and reasons[0]:
                    break
                assert time.monotonic() < deadline, answer
                await asyncio.sleep(0.05)
            assert reasons[0].startswith("waiting: ")
            assert (
                "used 2.0 of their 1 slot-hours of the last 24 h; they may run again at"
                in (reasons[0])
            )

    asyncio.run(asyncio.wait_for(body(), 120))
