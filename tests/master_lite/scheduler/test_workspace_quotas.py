"""Workspace slot quotas in the pure policy: a workspace's experiments together hold at most its
quota (over all pools and users), the waiting ones say so, and other workspaces use the rest."""

from __future__ import annotations

import pytest

from master_lite.scheduler import AllocationRequest, Holding, Policy, Request, Scheduler, decide

NOW = 1000.0
ML = 7  # the workspace id of "ml-team"


def want(key, user, exp, slots=1, order=0, workspace_id=ML, workspace="ml-team", pool="default"):
    return Request(
        key=key,
        user=user,
        experiment_id=exp,
        slots=slots,
        order=order,
        pool=pool,
        workspace_id=workspace_id,
        workspace=workspace,
    )


def held(key, user, exp, slots=1, workspace_id=ML, pool="default"):
    return Holding(
        key=key,
        user=user,
        experiment_id=exp,
        slots=slots,
        started=0.0,
        pool=pool,
        workspace_id=workspace_id,
    )


@pytest.mark.parametrize("kind", ["fair_share", "priority"])
def test_a_workspace_quota_counts_every_user_and_pool_and_lets_others_use_the_rest(kind):
    policy = Policy(kind=kind, workspace_max_slots={ML: 4})
    wants = [want(f"a{i}", "alice", 1, order=i) for i in range(3)]
    wants += [want(f"b{i}", "bob", 2, order=10 + i, pool="cpu") for i in range(3)]
    wants += [
        want(f"o{i}", "olga", 3, order=20 + i, workspace_id=8, workspace="ops") for i in range(3)
    ]
    decision = decide({"default": 8, "cpu": 8}, [], wants, policy, NOW)
    ml = [k for k in decision.grants if k[0] in "ab"]
    assert len(ml) == 4  # alice and bob together, over both pools
    assert {k for k in decision.grants if k[0] == "o"} == {"o0", "o1", "o2"}
    quota_waits = [k for k in ("a0", "a1", "a2", "b0", "b1", "b2") if k not in ml]
    assert {decision.reasons[k] for k in quota_waits} == {
        "waiting: workspace ml-team is at its 4-slot quota"
    }


def test_running_slots_count_and_nothing_is_preempted_for_a_quota():
    policy = Policy(kind="fair_share", workspace_max_slots={ML: 2})
    holdings = [held("a0", "alice", 1), held("a1", "alice", 1), held("a2", "alice", 1)]
    decision = decide({"default": 8}, holdings, [want("b0", "bob", 2)], policy, NOW)
    assert decision.grants == [] and decision.preempt == []
    assert decision.reasons["b0"] == "waiting: workspace ml-team is at its 2-slot quota"


def test_a_request_larger_than_its_workspace_quota_says_it_cannot_start():
    policy = Policy(kind="fair_share", workspace_max_slots={ML: 2})
    decision = decide({"default": 8}, [], [want("big", "alice", 1, slots=3)], policy, NOW)
    assert decision.reasons["big"].startswith(
        "waiting: needs 3 slots, more than workspace ml-team's 2-slot quota"
    )
    assert "det workspace resource-quota set" in decision.reasons["big"]


def test_user_and_workspace_quotas_both_apply():
    policy = Policy(kind="fair_share", max_slots_per_user=1, workspace_max_slots={ML: 5})
    wants = [want("a0", "alice", 1, order=0), want("a1", "alice", 1, order=1)]
    decision = decide({"default": 8}, [], wants, policy, NOW)
    assert decision.grants == ["a0"]
    assert decision.reasons["a1"] == "waiting: alice is at their 1-slot quota"


def test_negative_workspace_quota_is_refused():
    with pytest.raises(ValueError, match="workspace 3's slot quota must be >= 0"):
        Policy(workspace_max_slots={3: -1})


def test_the_scheduler_applies_quotas_set_at_run_time_and_grants_when_raised():
    scheduler = Scheduler([0, 1, 2, 3], policy=Policy(kind="fair_share"))
    scheduler.set_workspace_quotas({ML: 1})
    for i in range(3):
        scheduler.request(
            AllocationRequest(
                f"t{i}", experiment_id=1, slots=1, user="alice", workspace_id=ML, workspace="ml"
            )
        )
    assert [g.request.allocation_key for g in scheduler.schedule()] == ["t0"]
    assert scheduler.wait_reason("t1") == "waiting: workspace ml is at its 1-slot quota"
    assert scheduler.experiment_wait_reason(1) == "waiting: workspace ml is at its 1-slot quota"
    scheduler.set_workspace_quotas({ML: 2})
    assert [g.request.allocation_key for g in scheduler.schedule()] == ["t1"]
    scheduler.set_workspace_quotas({})
    assert [g.request.allocation_key for g in scheduler.schedule()] == ["t2"]


def test_a_moved_experiment_counts_against_its_new_workspace():
    scheduler = Scheduler([0, 1, 2, 3], policy=Policy(kind="fair_share"))
    scheduler.set_workspace_quotas({ML: 1})
    for i in range(2):
        scheduler.request(
            AllocationRequest(
                f"t{i}", experiment_id=1, slots=1, user="alice", workspace_id=ML, workspace="ml"
            )
        )
    assert [g.request.allocation_key for g in scheduler.schedule()] == ["t0"]
    scheduler.move_experiment(1, 8, "ops")  # no quota there: its waiting trial starts
    assert [g.request.allocation_key for g in scheduler.schedule()] == ["t1"]
    scheduler.request(AllocationRequest("u0", experiment_id=2, slots=1, user="bob", workspace_id=8))
    scheduler.set_workspace_quotas({8: 2})  # ops holds 2 now: bob waits
    assert scheduler.schedule() == []
    assert scheduler.wait_reason("u0") == "waiting: workspace 8 is at its 2-slot quota"


def test_a_capped_workspace_preempts_no_more_than_its_quota_lets_it_use():
    policy = Policy(kind="fair_share", min_run_seconds=0, workspace_max_slots={ML: 1})
    bobs = [held(f"b{i}", "bob", 2, workspace_id=8) for i in range(4)]
    alices = [want(f"a{i}", "alice", 1, order=i) for i in range(4)]
    decision = decide({"default": 4}, bobs, alices, policy, NOW)
    assert len(decision.preempt) == 1  # one slot for alice's workspace, not her fair share of 2
    assert decision.reasons["a3"] == "waiting: workspace ml-team is at its 1-slot quota"
