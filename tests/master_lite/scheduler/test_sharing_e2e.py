"""Sharing the GPUs on a real master with a fake 4-GPU inventory and real trial processes
(issue 30): two users' searches split the slots by fair share (the first user's extra trials
preempted at a checkpoint and resumed from it, every result as alone), a priority-1 job
preempts both under the priority scheduler, and a quota keeps a user at N slots.

The trials train deterministically (each step folds the hyperparameter into a running value
kept in their checkpoint), so a trial that lost or repeated a step would end with another
value than the formula: the formula is the result of the same search run alone."""

from __future__ import annotations

import json

import pytest

from determined.common.api import Session
from tests._support.master import submit, trial_logs, trials
from tests._support.waiting import wait_until

pytestmark = pytest.mark.slow

STEPS = 40
TRAIN = """
import json, pathlib, sys, time
import determined as det

info = det.get_cluster_info()
h = info.trial.hparams["h"]
step_s = info.user_data["step_s"]
state = {"step": 0, "acc": 0.0}
with det.core.init() as core:
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            state = json.loads((path / "state.json").read_text())
        print("RESUMED " + json.dumps(state), flush=True)

    def save():
        with core.checkpoint.store_path({"steps_completed": state["step"]}) as (path, _):
            (path / "state.json").write_text(json.dumps(state))

    for op in core.searcher.operations():
        while state["step"] < op.length:
            time.sleep(step_s)
            state["step"] += 1
            state["acc"] = round(state["acc"] * 0.9 + h, 9)
            core.train.report_progress(state["step"] / op.length)
            if core.preempt.should_preempt():
                save()
                print("PREEMPTED " + json.dumps(state), flush=True)
                sys.exit(0)
        core.train.report_validation_metrics(
            steps_completed=state["step"], metrics={"acc": state["acc"]}
        )
        save()
        op.report_completed(state["acc"])
"""


def expected(h: int, steps: int = STEPS) -> float:
    acc = 0.0
    for _ in range(steps):
        acc = round(acc * 0.9 + h, 9)
    return acc


def search(name: str, *, step_s: float = 0.15, priority: int | None = None, **resources) -> dict:
    config: dict = {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {
            "name": "grid",
            "metric": "acc",
            "smaller_is_better": False,
            "max_length": STEPS,
            "max_concurrent_trials": 0,
        },
        "hyperparameters": {"h": {"type": "categorical", "vals": [1, 2, 3, 4]}},
        "data": {"step_s": step_s},
        "resources": {**resources, **({} if priority is None else {"priority": priority})},
    }
    return config


def user_session(master, name: str) -> Session:
    master.session.post(
        "/users", {"user": {"username": name, "admin": False}, "password": "Pw-" + name + "-123"}
    )
    answer = master.session.post(
        "/auth/login", {"username": name, "password": "Pw-" + name + "-123"}
    )
    return Session(master.url, answer["token"])


def holders(master) -> dict[str, int]:
    """Slots held per user now (from GET /resources and the trials' experiments)."""
    owner_of: dict[int, str] = {}
    for experiment in master.session.get("/experiments")["experiments"]:
        for trial in trials(master, experiment["id"]):
            owner_of[trial["id"]] = experiment["username"]
    held: dict[str, int] = {}
    for slot in master.session.get("/resources")["slots"]:
        if slot["trial_id"] is not None:
            user = owner_of.get(slot["trial_id"], "?")
            held[user] = held.get(user, 0) + 1
    return held


def final_results(master, exp_id: int) -> dict[int, float]:
    """h -> the trial's last validation `acc`, once the experiment completed."""
    wait_until(
        lambda: master.session.get(f"/experiments/{exp_id}")["experiment"]["state"] == "COMPLETED",
        timeout=240,
        what=f"experiment {exp_id} to complete",
    )
    out = {}
    for trial in trials(master, exp_id):
        assert trial["state"] == "COMPLETED", trial
        out[trial["hparams"]["h"]] = trial["latest_validation"]["metrics"]["acc"]
    return out


def lines(master, trial_id: int, marker: str) -> list[dict]:
    return [
        json.loads(e["line"].split(marker + " ", 1)[1])
        for e in trial_logs(master, trial_id)
        if marker + " " in e["line"]
    ]


def test_two_users_split_four_gpus_and_the_preempted_trials_resume_from_their_checkpoints(
    start_master,
):
    master = start_master(
        cpu_slots=None,
        extra_args=["--scheduler", "fair_share", "--scheduler-min-run-seconds", "1"],
        env={"MASTER_LITE_FAKE_GPUS": "4", "MASTER_LITE_PREEMPTION_GRACE_SECONDS": "60"},
    )
    alice, bob = user_session(master, "fair_alice"), user_session(master, "fair_bob")
    first = submit(alice, search("alice-search"), {"train.py": TRAIN})
    wait_until(lambda: holders(master).get("fair_alice") == 4, what="alice's 4 trials to run")
    second = submit(bob, search("bob-search"), {"train.py": TRAIN})

    # Each soon holds 2 slots: alice's two newest trials checkpoint and go back to waiting.
    wait_until(
        lambda: holders(master) == {"fair_alice": 2, "fair_bob": 2},
        timeout=60,
        what="alice and bob to hold 2 slots each",
        details=lambda: str(holders(master)),
    )
    # Bob's other trials wait for his fair share, and say so.
    waiting = wait_until(
        lambda: [t for t in trials(master, second) if t["run_state"] == "QUEUED"],
        what="bob's trials beyond his share to wait",
    )
    assert all("fair share" in (t["wait_reason"] or "") for t in waiting), waiting

    assert final_results(master, first) == {h: expected(h) for h in (1, 2, 3, 4)}
    assert final_results(master, second) == {h: expected(h) for h in (1, 2, 3, 4)}
    preempted = [t for t in trials(master, first) if lines(master, t["id"], "PREEMPTED")]
    assert len(preempted) >= 2, [t["id"] for t in trials(master, first)]
    for trial in preempted:
        # Preemption is not a failure: no restart counted; the next run resumed where the
        # checkpoint left it, never from scratch.
        assert trial["restarts"] == 0 and trial["run_id"] >= 2, trial
        stops, resumes = (
            lines(master, trial["id"], "PREEMPTED"),
            lines(master, trial["id"], "RESUMED"),
        )
        assert [r["step"] for r in resumes] == [s["step"] for s in stops], (stops, resumes)
        logged = [e["line"] for e in trial_logs(master, trial["id"])]
        assert any("preempted by the fair_share scheduler" in line for line in logged)


def test_a_priority_one_job_preempts_both_users_and_they_finish_after_it(start_master):
    master = start_master(
        cpu_slots=None,
        extra_args=["--scheduler", "priority", "--scheduler-min-run-seconds", "1"],
        env={"MASTER_LITE_FAKE_GPUS": "4", "MASTER_LITE_PREEMPTION_GRACE_SECONDS": "60"},
    )
    alice, bob = user_session(master, "fair_alice"), user_session(master, "fair_bob")
    first = submit(alice, search("alice-two", max_slots=2), {"train.py": TRAIN})
    second = submit(bob, search("bob-two", max_slots=2), {"train.py": TRAIN})
    wait_until(
        lambda: holders(master) == {"fair_alice": 2, "fair_bob": 2},
        what="alice and bob to hold 2 slots each",
        details=lambda: str(holders(master)),
    )
    # The admin's 4-trial search at priority 1 needs all four slots.
    urgent_config = search("urgent", step_s=0.05, priority=1)
    urgent_config["hyperparameters"]["h"]["vals"] = [5, 6, 7, 8]
    urgent = submit(master.session, urgent_config, {"train.py": TRAIN})
    wait_until(
        lambda: holders(master).get(master.session.get("/me")["user"]["username"]) == 4,
        timeout=60,
        what="the priority-1 job to hold all 4 slots",
        details=lambda: str(holders(master)),
    )
    # Alice's whole search waits now, and its experiment JSON says why.
    waits = wait_until(
        lambda: (
            (e := alice.get(f"/experiments/{first}")["experiment"])["run_state"] == "QUEUED" and e
        ),
        what="alice's experiment to wait",
    )
    assert waits["wait_reason"].startswith("waiting"), waits
    assert final_results(master, urgent) == {h: expected(h) for h in (5, 6, 7, 8)}
    assert final_results(master, first) == {h: expected(h) for h in (1, 2, 3, 4)}
    assert final_results(master, second) == {h: expected(h) for h in (1, 2, 3, 4)}
    stopped = [
        t
        for exp in (first, second)
        for t in trials(master, exp)
        if lines(master, t["id"], "PREEMPTED")
    ]
    assert {t["experiment_id"] for t in stopped} == {first, second}  # both were preempted
    assert all(t["restarts"] == 0 for t in stopped)


def test_a_quota_keeps_a_user_at_two_slots_with_a_reason(start_master):
    master = start_master(
        cpu_slots=None,
        env={"MASTER_LITE_FAKE_GPUS": "4", "MASTER_LITE_MAX_SLOTS_PER_USER": "2"},
    )
    alice = user_session(master, "fair_alice")
    exp = submit(alice, search("alice-quota", step_s=0.05), {"train.py": TRAIN})
    waiting = wait_until(
        lambda: (
            holders(master).get("fair_alice") == 2
            and [t for t in trials(master, exp) if t["run_state"] == "QUEUED"]
        ),
        what="alice at 2 slots with trials waiting",
    )
    assert {t["wait_reason"] for t in waiting} == {"waiting: fair_alice is at their 2-slot quota"}
    seen_most = 0

    def done() -> bool:
        nonlocal seen_most
        seen_most = max(seen_most, holders(master).get("fair_alice", 0))
        return master.session.get(f"/experiments/{exp}")["experiment"]["state"] == "COMPLETED"

    wait_until(done, timeout=240, what="the search to complete", interval=0.1)
    assert seen_most == 2
    assert final_results(master, exp) == {h: expected(h) for h in (1, 2, 3, 4)}


def asha(name: str) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {
            "name": "async_halving",
            "metric": "acc",
            "smaller_is_better": False,
            "num_rungs": 3,
            "divisor": 2,
            "max_length": {"batches": 32},
            "max_trials": 4,
            "max_concurrent_trials": 1,  # one at a time: the same promotions in both runs
        },
        "hyperparameters": {"h": {"type": "int", "minval": 1, "maxval": 9}},
        "reproducibility": {"experiment_seed": 3},
        "data": {"step_s": 0.25},  # a first rung of 2 s: longer than the minimum run time
    }


def validations(master, exp_id: int) -> list[tuple]:
    """Every validation of the search: (hparam, steps, acc), sorted."""
    out = []
    for trial in trials(master, exp_id):
        for steps, metrics in master.series(trial["id"], "validation"):
            out.append((trial["hparams"]["h"], steps, metrics["acc"]))
    return sorted(out)


def test_an_asha_search_under_rebalancing_reports_the_same_validations_as_alone(start_master):
    options = {
        "cpu_slots": None,
        "extra_args": ["--scheduler-min-run-seconds", "1"],
        "env": {"MASTER_LITE_FAKE_GPUS": "1", "MASTER_LITE_PREEMPTION_GRACE_SECONDS": "60"},
    }
    alone = start_master(**options)
    alone_exp = submit(user_session(alone, "fair_alice"), asha("alone"), {"train.py": TRAIN})
    final_results(alone, alone_exp)
    expected_validations = validations(alone, alone_exp)
    alone.stop()

    shared = start_master(**options)
    alice, bob = user_session(shared, "fair_alice"), user_session(shared, "fair_bob")
    exp = submit(alice, asha("shared"), {"train.py": TRAIN})
    wait_until(lambda: holders(shared).get("fair_alice") == 1, what="alice's first trial to run")
    other = search("bob-grid", step_s=0.1)
    other["hyperparameters"]["h"]["vals"] = [1, 2]
    bob_exp = submit(bob, other, {"train.py": TRAIN})
    assert final_results(shared, bob_exp) == {1: expected(1), 2: expected(2)}
    final_results(shared, exp)
    # The rebalancing really happened: some of alice's trials were preempted and resumed.
    assert any(lines(shared, t["id"], "PREEMPTED") for t in trials(shared, exp))
    assert all(t["restarts"] == 0 for t in trials(shared, exp))
    assert validations(shared, exp) == expected_validations


IGNORES = """
import time
import determined as det

with det.core.init() as core:
    for op in core.searcher.operations():
        for step in range(1, op.length + 1):
            time.sleep(det.get_cluster_info().user_data["step_s"])
            core.train.report_progress(step / op.length)
        core.train.report_validation_metrics(steps_completed=op.length, metrics={"acc": 1.0})
        op.report_completed(1.0)
"""


def test_a_trial_that_ignores_the_rebalance_is_terminated_after_the_grace_and_not_failed(
    start_master,
):
    master = start_master(
        cpu_slots=None,
        extra_args=["--scheduler-min-run-seconds", "1"],
        env={"MASTER_LITE_FAKE_GPUS": "2", "MASTER_LITE_PREEMPTION_GRACE_SECONDS": "2"},
    )
    alice, bob = user_session(master, "fair_alice"), user_session(master, "fair_bob")
    mine = search("alice-ignores", step_s=0.1)
    mine["hyperparameters"]["h"]["vals"] = [1, 2]
    first = submit(alice, mine, {"train.py": IGNORES})
    wait_until(lambda: holders(master).get("fair_alice") == 2, what="alice's 2 trials to run")
    theirs = search("bob-one", step_s=0.05)
    theirs["hyperparameters"]["h"]["vals"] = [1]
    second = submit(bob, theirs, {"train.py": IGNORES})
    final_results(master, second)
    final_results(master, first)
    terminated = [
        t
        for t in trials(master, first)
        if any(
            "of the preemption signal: terminating it" in line
            for line in (e["line"] for e in trial_logs(master, t["id"]))
        )
    ]
    assert len(terminated) == 1, [t["run_id"] for t in trials(master, first)]
    # Terminated for the rebalance, not failed: no restart counted, a second run finished it.
    assert terminated[0]["restarts"] == 0 and terminated[0]["run_id"] == 2, terminated[0]
