"""The policy on a simulated cluster (hundreds of users, thousands of trials, 64 slots):
shares within a tolerance over time, no starvation, priority preemption, the minimum run time.
Pure function, no master, no clock: ticks are simulated time."""

from __future__ import annotations

import random

from master_lite.scheduler import Policy

from ._sim import Simulation, Trial

MIN_RUN = 5


def many_users(users: int = 300, trials_each: int = 7, seed: int = 1) -> list[Trial]:
    rng = random.Random(seed)
    trials = []
    for u in range(users):
        for i in range(trials_each):
            trials.append(
                Trial(
                    key=f"u{u}-t{i}",
                    user=f"user{u}",
                    experiment_id=u * 10 + i % 2,
                    work=rng.randint(5, 30),
                    submit=rng.randint(0, 50),
                )
            )
    return trials


def test_hundreds_of_users_thousands_of_trials_all_finish_and_share_evenly():
    trials = many_users()
    assert len(trials) == 2100
    sim = Simulation(64, Policy(kind="fair_share", min_run_seconds=MIN_RUN), trials)
    sim.run(until=5000)
    assert all(t.finished is not None for t in trials), "a trial starved"
    # Each user's slot-time while all of them still had work is close to an equal share.
    busy_until = min(max(t.finished for t in trials if t.user == u) for u in sim.usage)  # type: ignore[type-var]
    window = (60, busy_until)
    per_user = [sim.slot_ticks(u, *window) for u in sim.usage]
    mean = sum(per_user) / len(per_user)
    assert mean > 0
    assert max(per_user) <= 1.6 * mean and min(per_user) >= 0.5 * mean, (
        min(per_user),
        mean,
        max(per_user),
    )
    assert sim.preempted_ages and min(sim.preempted_ages) >= MIN_RUN


def test_eight_heavy_users_each_hold_an_eighth_of_64_slots_over_time():
    trials = [
        Trial(key=f"u{u}-t{i}", user=f"u{u}", experiment_id=u, work=20, submit=u * 10)
        for u in range(8)
        for i in range(240)  # 4800 slot-ticks each: more than 400 ticks at 8 slots
    ]
    sim = Simulation(64, Policy(kind="fair_share", min_run_seconds=MIN_RUN), trials)
    sim.run(until=400)
    for u in range(8):  # from when the last user arrived, plus one min run
        got = sim.slot_ticks(f"u{u}", 100, 400) / 300
        assert abs(got - 8) <= 0.8, (u, got)
    assert min(sim.preempted_ages) >= MIN_RUN


def test_user_weights_divide_slot_time():
    trials = [
        Trial(key=f"{u}-{i}", user=u, experiment_id=n, work=10)
        for n, u in enumerate(("heavy", "light"))
        for i in range(400)
    ]
    policy = Policy(kind="fair_share", min_run_seconds=MIN_RUN, user_weights={"heavy": 3})
    sim = Simulation(16, policy, trials)
    sim.run(until=200)
    assert abs(sim.slot_ticks("heavy", 20, 200) / 180 - 12) <= 0.5
    assert abs(sim.slot_ticks("light", 20, 200) / 180 - 4) <= 0.5


def test_a_late_user_is_not_starved_by_an_early_big_search():
    trials = [Trial(key=f"big-{i}", user="early", experiment_id=1, work=50) for i in range(640)]
    trials.append(Trial(key="late", user="late", experiment_id=2, work=5, submit=30))
    sim = Simulation(64, Policy(kind="fair_share", min_run_seconds=MIN_RUN), trials)
    sim.run(until=60)
    late = next(t for t in trials if t.key == "late")
    # It waits for one run to pass its minimum run time, one tick of preemption, no more.
    assert late.first_start is not None and late.first_start <= 30 + 2
    assert late.finished is not None


def test_priority_preemption_makes_room_for_an_urgent_job_after_the_minimum_run_time():
    trials = [
        Trial(key=f"low-{i}", user=f"u{i % 50}", experiment_id=i % 50, work=100, priority=50)
        for i in range(1000)
    ]
    trials += [
        Trial(
            key=f"urgent-{i}", user="boss", experiment_id=999, work=5, slots=4, priority=1, submit=2
        )
        for i in range(4)
    ]
    sim = Simulation(64, Policy(kind="priority", min_run_seconds=MIN_RUN), trials)
    sim.run(until=40)
    urgent = [t for t in trials if t.key.startswith("urgent")]
    # Runs started at tick 0 may be preempted from tick MIN_RUN; their exit takes a tick.
    assert all(t.first_start == MIN_RUN + 1 for t in urgent), [t.first_start for t in urgent]
    assert min(sim.preempted_ages) >= MIN_RUN
    assert sum(t.preemptions for t in trials) == 16  # exactly the slots it needed

    calm = [dataclass_copy(t) for t in trials]
    off = Simulation(64, Policy(kind="priority", preemption=False), calm)
    off.run(until=40)
    assert all(t.first_start is None for t in calm if t.key.startswith("urgent"))
    assert sum(t.preemptions for t in calm) == 0


def dataclass_copy(t: Trial) -> Trial:
    return Trial(
        key=t.key,
        user=t.user,
        experiment_id=t.experiment_id,
        work=t.work,
        slots=t.slots,
        priority=t.priority,
        weight=t.weight,
        submit=t.submit,
    )
