"""The scheduling policy as a pure function: fair share between users and experiments,
priority preemption, the minimum run time, quotas, pools and the reasons a request waits."""

from __future__ import annotations

import pytest

from master_lite.scheduler import AllocationRequest, Holding, Policy, Request, Scheduler, decide

FAIR = Policy(kind="fair_share", min_run_seconds=10)
NOW = 1000.0


def running(key, user, exp, slots=1, started=0.0, priority=42, pool="default", stopping=False):
    return Holding(
        key=key,
        user=user,
        experiment_id=exp,
        slots=slots,
        started=started,
        priority=priority,
        pool=pool,
        stopping=stopping,
    )


def waiting(key, user, exp, slots=1, order=100, priority=42, weight=1.0, pool="default"):
    return Request(
        key=key,
        user=user,
        experiment_id=exp,
        slots=slots,
        order=order,
        priority=priority,
        weight=weight,
        pool=pool,
    )


def alice_holds_four(started=(1.0, 2.0, 3.0, 4.0)):
    return [running(f"a{i}", "alice", 1, started=s) for i, s in enumerate(started)]


def bob_wants_four():
    return [waiting(f"b{i}", "bob", 2, order=10 + i) for i in range(4)]


def test_a_second_user_gets_half_by_preempting_the_first_users_newest_runs():
    decision = decide({"default": 4}, alice_holds_four(), bob_wants_four(), FAIR, NOW)
    assert decision.grants == []
    assert decision.preempt == ["a3", "a2"]  # newest first, only down to alice's share
    assert decision.shares["default"] == {"alice": 2, "bob": 2}
    assert "preempted" in decision.reasons["b0"] and "preempted" in decision.reasons["b1"]
    assert "fair share" in decision.reasons["b2"]


def test_a_user_above_their_share_is_told_so_in_words_that_add_up():
    # Alice's runs are too young to preempt (min_run_seconds): she keeps 4 of 4 slots for now,
    # and her next trial waits because she is above her share of 3 (bob wants 1), not "4 of the 3".
    young = alice_holds_four(started=(NOW - 1,) * 4)
    decision = decide(
        {"default": 4},
        young,
        [waiting("b0", "bob", 2), waiting("a9", "alice", 1, order=101)],
        FAIR,
        NOW,
    )
    assert decision.preempt == []
    assert decision.reasons["a9"] == (
        "waiting for its fair share: alice already holds 4 slots, above their fair share of 3 "
        "in pool 'default'"
    )


def test_the_next_pass_preempts_nobody_more_and_grants_once_the_runs_exited():
    holdings = alice_holds_four()
    stopping = [
        *holdings[:2],
        *(running(h.key, "alice", 1, started=h.started, stopping=True) for h in holdings[2:]),
    ]
    again = decide({"default": 4}, stopping, bob_wants_four(), FAIR, NOW)
    assert again.preempt == [] and again.grants == []
    assert "being freed" in again.reasons["b0"]
    requeued = [waiting("a3", "alice", 1, order=20), waiting("a2", "alice", 1, order=21)]
    after = decide({"default": 4}, holdings[:2], [*bob_wants_four(), *requeued], FAIR, NOW)
    assert after.grants == ["b0", "b1"] and after.preempt == []
    assert "alice holds 2 of the 2 slots" in after.reasons["a3"]


def test_runs_younger_than_the_minimum_run_time_are_never_preempted():
    young = alice_holds_four(started=(NOW - 1, NOW - 2, NOW - 3, NOW - 20))
    decision = decide({"default": 4}, young, bob_wants_four(), FAIR, NOW)
    assert decision.preempt == ["a3"]  # the one that ran 20 s; not enough for bob's two
    decision = decide({"default": 4}, young, bob_wants_four()[:1], FAIR, NOW)
    assert decision.preempt == ["a3"]


def test_a_lone_user_gets_the_whole_pool():
    decision = decide({"default": 4}, [], bob_wants_four(), FAIR, NOW)
    assert decision.grants == ["b0", "b1", "b2", "b3"]


def test_user_weights_and_experiment_weights_divide_the_shares():
    weighted = Policy(kind="fair_share", user_weights={"alice": 3})
    wants = [waiting(f"a{i}", "alice", 1, order=i) for i in range(8)]
    wants += [waiting(f"b{i}", "bob", 2, order=10 + i) for i in range(8)]
    assert decide({"default": 8}, [], wants, weighted, NOW).shares["default"] == {
        "alice": 6,
        "bob": 2,
    }
    # Within one user: experiment 1 (weight 3) and experiment 2 (weight 1).
    mine = [waiting(f"x{i}", "carol", 1, order=i, weight=3) for i in range(8)]
    mine += [waiting(f"y{i}", "carol", 2, order=10 + i, weight=1) for i in range(8)]
    granted = decide({"default": 4}, [], mine, FAIR, NOW).grants
    assert sorted(granted) == ["x0", "x1", "x2", "y0"]


def test_priority_preempts_less_important_runs_only_with_preemption_on():
    holdings = [running(f"low{i}", "alice", 1, started=i, priority=50) for i in range(4)]
    urgent = [waiting("urgent", "bob", 2, slots=2, priority=1)]
    on = decide({"default": 4}, holdings, urgent, Policy(kind="priority"), NOW)
    assert on.preempt == ["low3", "low2"] and on.grants == []
    off = decide({"default": 4}, holdings, urgent, Policy(kind="priority", preemption=False), NOW)
    assert off.preempt == [] and "free slots" in off.reasons["urgent"]
    # Equal priority never preempts.
    same = [waiting("same", "bob", 2, priority=50)]
    assert decide({"default": 4}, holdings, same, Policy(kind="priority"), NOW).preempt == []


def test_a_quota_holds_a_user_back_with_a_reason_and_lets_others_use_the_slots():
    quota = Policy(kind="fair_share", max_slots_per_user=2, user_max_slots={"bob": 3})
    wants = [waiting(f"a{i}", "alice", 1, order=i) for i in range(4)]
    wants += [waiting(f"b{i}", "bob", 2, order=10 + i) for i in range(4)]
    decision = decide({"default": 8}, [], wants, quota, NOW)
    assert sorted(decision.grants) == ["a0", "a1", "b0", "b1", "b2"]
    assert decision.reasons["a2"] == "waiting: alice is at their 2-slot quota"
    assert decision.reasons["b3"] == "waiting: bob is at their 3-slot quota"


def test_pools_are_decided_apart_and_an_unknown_pool_is_named():
    wants = [
        waiting("g", "alice", 1, slots=2, pool="gpu"),
        waiting("c", "alice", 2, slots=1, pool="cpu"),
        waiting("x", "alice", 3, slots=1, pool="tpu"),
        waiting("big", "alice", 4, slots=3, pool="gpu"),
    ]
    decision = decide({"gpu": 2, "cpu": 4}, [], wants, FAIR, NOW)
    assert sorted(decision.grants) == ["c", "g"]
    assert "resource pool 'tpu' does not exist" in decision.reasons["x"]
    assert "needs 3 slots but resource pool 'gpu' has 2" in decision.reasons["big"]


def test_bad_policy_values_are_refused_naming_the_setting():
    with pytest.raises(ValueError, match="scheduler: expected one of fair_share, priority"):
        Policy(kind="round_robin")
    with pytest.raises(ValueError, match="max_slots_per_user"):
        Policy(max_slots_per_user=-1)
    with pytest.raises(ValueError, match="user_weights: 'bob'"):
        Policy(user_weights={"bob": 0})


def test_the_scheduler_marks_preempted_grants_stopping_and_lists_them_in_its_queue():
    clock = [0.0]
    scheduler = Scheduler([0, 1, 2, 3], policy=FAIR, clock=lambda: clock[0])
    for i in range(4):
        scheduler.request(AllocationRequest(f"a{i}", 1, 1, user="alice"))
    assert len(scheduler.step().grants) == 4
    clock[0] = 30.0
    for i in range(4):
        scheduler.request(AllocationRequest(f"b{i}", 2, 1, user="bob"))
    step = scheduler.step()
    assert step.grants == [] and len(step.preempt) == 2
    assert scheduler.step().preempt == []  # already stopping: not chosen again
    queue = scheduler.queue()
    assert [e.state for e in queue].count("STOPPING") == 2
    assert [e.state for e in queue].count("QUEUED") == 4
    waits = [e for e in queue if e.state == "QUEUED"]
    assert all(e.wait_reason and e.user == "bob" and e.slots_held == 0 for e in waits)
    assert scheduler.wait_reason("b0") == waits[0].wait_reason
    assert scheduler.experiment_wait_reason(2) == waits[0].wait_reason
    assert scheduler.experiment_wait_reason(1) is None
