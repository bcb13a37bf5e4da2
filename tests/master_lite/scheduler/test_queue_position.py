"""The job queue position (`det job update --ahead-of/--behind-of`) in the pure policy: one sort
key after priority and before arrival. The priority policy starts jobs in that order; fair
share uses it to order a user's own jobs and the leftover slots, never the shares between
users."""

from __future__ import annotations

from master_lite.scheduler import AllocationRequest, Policy, Request, Scheduler, decide

PRIORITY = Policy(kind="priority", preemption=False)
FAIR = Policy(kind="fair_share", min_run_seconds=10)
NOW = 1000.0


def waiting(key, user, exp, *, order, position, slots=1, priority=42):
    return Request(
        key=key,
        user=user,
        experiment_id=exp,
        slots=slots,
        order=order,
        priority=priority,
        position=position,
    )


def test_priority_policy_starts_the_job_moved_ahead_first_though_it_arrived_later():
    requests = [
        waiting("old", "alice", 1, order=1, position=1.0),
        waiting("moved", "bob", 2, order=2, position=0.5),  # moved ahead of experiment 1
    ]
    decision = decide({"default": 1}, [], requests, PRIORITY, NOW)
    assert decision.grants == ["moved"]
    assert "old" in decision.reasons


def test_without_a_position_arrival_order_decides_as_before():
    requests = [
        waiting("first", "alice", 1, order=1, position=0.0),
        waiting("second", "bob", 2, order=2, position=0.0),
    ]
    assert decide({"default": 1}, [], requests, PRIORITY, NOW).grants == ["first"]


def test_priority_comes_before_the_position():
    requests = [
        waiting("important", "alice", 1, order=2, position=9.0, priority=10),
        waiting("moved", "bob", 2, order=1, position=0.5, priority=42),
    ]
    assert decide({"default": 1}, [], requests, PRIORITY, NOW).grants == ["important"]


def test_grants_over_several_pools_start_in_queue_order():
    requests = [
        waiting("a", "alice", 1, order=1, position=3.0),
        waiting("b", "bob", 2, order=2, position=2.0),
    ]
    requests[1] = Request(**{**requests[1].__dict__, "pool": "gpu"})
    decision = decide({"default": 1, "gpu": 1}, [], requests, PRIORITY, NOW)
    assert decision.grants == ["b", "a"]


def test_fair_share_orders_one_users_own_jobs_by_position():
    requests = [
        waiting("e1", "alice", 1, order=1, position=1.0),
        waiting("e2", "alice", 2, order=2, position=0.5),
    ]
    decision = decide({"default": 1}, [], requests, FAIR, NOW)
    assert decision.grants == ["e2"]


def test_fair_share_breaks_an_experiment_share_tie_by_position():
    # One user, two equal-weight experiments wanting 2 slots each on 3 slots: the odd slot
    # goes to the job earlier in the queue.
    requests = [waiting(f"e1-{i}", "alice", 1, order=i, position=1.0) for i in range(2)] + [
        waiting(f"e2-{i}", "alice", 2, order=10 + i, position=0.5) for i in range(2)
    ]
    decision = decide({"default": 3}, [], requests, FAIR, NOW)
    assert sorted(decision.grants) == ["e1-0", "e2-0", "e2-1"]


def test_fair_share_positions_never_change_the_shares_between_users():
    requests = [waiting(f"a{i}", "alice", 1, order=10 + i, position=0.5) for i in range(2)] + [
        waiting(f"b{i}", "bob", 2, order=i, position=9.0) for i in range(2)
    ]
    decision = decide({"default": 2}, [], requests, FAIR, NOW)
    assert decision.shares["default"] == {"alice": 1, "bob": 1}
    assert sorted(decision.grants) == ["a0", "b0"]


def test_the_scheduler_reorders_waiting_and_granted_requests_of_a_moved_experiment():
    scheduler = Scheduler([0])
    for key, exp in (("t1", 1), ("t2", 2), ("t3", 3)):
        scheduler.request(AllocationRequest(key, exp, 1, position=float(exp)))
    assert [g.request.allocation_key for g in scheduler.schedule()] == ["t1"]
    scheduler.update_experiment(3, priority=42, max_slots=None, position=1.5)
    assert [r.allocation_key for r in scheduler.pending()] == ["t3", "t2"]
    assert [e.key for e in scheduler.queue()] == ["t1", "t3", "t2"]
    scheduler.release("t1")
    assert [g.request.allocation_key for g in scheduler.schedule()] == ["t3"]
    scheduler.update_experiment(3, priority=42, max_slots=None, position=5.0)
    assert scheduler.granted()["t3"].request.position == 5.0
