"""The Core API tutorial's hyperparameter search (examples/core_api/3_hpsearch.py + .yaml, the
≤0.37 operations form: adaptive_asha with max_length 100) on a real master, against the plan
that `simulate()` predicts for the same expanded config.

One slot makes the order in which rung results arrive the order of request ids — the order the
simulation (every trial at the same pace, ties by request id) assumes — so promotions must match
the plan exactly.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any

import pytest

from master_lite.searcher import simulate
from tests._support import (
    MasterProcess,
    child_env,
    context_tarball,
    wait_for_experiment,
    wait_until,
)

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples" / "core_api"


def tutorial_context() -> str:
    script = (EXAMPLES / "3_hpsearch.py").read_text()
    assert script.count("time.sleep(0.1)") == 1, "the tutorial changed: update this test's copy"
    return context_tarball(
        {"3_hpsearch.py": script.replace("time.sleep(0.1)", "time.sleep(0.005)")}
    )


def tutorial_config() -> str:
    text = (EXAMPLES / "3_hpsearch.yaml").read_text()
    assert "max_length: 100" in text and "adaptive_asha" in text
    return text + "\nreproducibility:\n  experiment_seed: 20261122\n"


# -- the Core API tutorial's stage 3 search plan (Determined's ASHA defaults), by hand --------
# Bracket A = trials 1-7, rungs at 25 and 100; bracket B = trials 8-10, one rung at 100. Every
# trial starts at once and trains at the same pace, so rung-0 results arrive in request-id order.
RUNG0_METRIC = {1: 5.0, 2: 3.0, 3: 4.0, 4: 1.0, 5: 2.0, 6: 6.0, 7: 0.5}


def by_request(request_id, hparams, length):
    return RUNG0_METRIC.get(request_id, 10.0 + request_id)


def stage3_config(**searcher):
    return {
        "searcher": {"name": "adaptive_asha", "metric": "x", "max_trials": 10, **searcher},
        "hyperparameters": {"increment_by": {"type": "int", "minval": 1, "maxval": 8}},
        "reproducibility": {"experiment_seed": 3},
    }


def test_worked_example_promotion_form_by_hand():
    # ≤0.37 (max_length 100, promotions, insertion after equals). Rung 0 of A, k-th result:
    # k=1..3: ⌊k/4⌋ = 0, nobody promoted; k=4 (trial 4, metric 1): ⌊4/4⌋ = 1 and it ranks
    # first -> promoted; k=5,6 (2.0, 6.0): not first, ⌊k/4⌋ still 1 -> nothing; k=7 (trial 7,
    # 0.5): ranks first -> promoted. Rung 0 is then full with nothing outstanding: trials
    # 5, 2, 3, 1, 6 are closed. Trials 4 and 7 (and all of B) finish at 100.
    sim = simulate(stage3_config(max_length=100), metric=by_request)
    assert [(t.request_id, t.bracket, t.lengths) for t in sim.trials] == [
        (1, 0, [25]),
        (2, 0, [25]),
        (3, 0, [25]),
        (4, 0, [25, 100]),
        (5, 0, [25]),
        (6, 0, [25]),
        (7, 0, [25, 100]),
        (8, 1, [100]),
        (9, 1, [100]),
        (10, 1, [100]),
    ]
    assert sim.total_length == 2 * 100 + 5 * 25 + 3 * 100
    assert [[(r.length, r.trials) for r in b.rungs] for b in sim.brackets] == [
        [(25, 7), (100, 2)],
        [(100, 3)],
    ]


def test_worked_example_time_metric_form_by_hand():
    # 0.38 (time_metric batches, max_time 100; stop-based, insertion before equals): a trial
    # continues iff it ranks in the top max(1, ⌊n/4⌋) of the n results in the rung so far.
    # n=1: 5.0 first -> on; n=2: 3.0 first -> on; n=3: 4.0 second -> stop; n=4: 1.0 first ->
    # on; n=5: 2.0 second of 5 (keep 1) -> stop; n=6: 6.0 -> stop; n=7: 0.5 first -> on.
    sim = simulate(stage3_config(time_metric="batches", max_time=100), metric=by_request)
    assert [(t.request_id, t.trained, t.state) for t in sim.trials] == [
        (1, 100, "stopped"),
        (2, 100, "stopped"),
        (3, 25, "stopped"),
        (4, 100, "stopped"),
        (5, 25, "stopped"),
        (6, 25, "stopped"),
        (7, 100, "stopped"),
        (8, 100, "stopped"),
        (9, 100, "stopped"),
        (10, 100, "stopped"),
    ]
    assert sim.total_length == 4 * 100 + 3 * 25 + 3 * 100
    assert [[(r.length, r.trials) for r in b.rungs] for b in sim.brackets] == [
        [(25, 7), (100, 4)],
        [(100, 3)],
    ]


def test_preview_search_prints_the_bracket_plan():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "determined.cli",
            "preview-search",
            str(EXAMPLES / "3_hpsearch.yaml"),
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Bracket 1: 2 rung(s), 7 trial(s), up to 8 at once" in done.stdout
    assert "Bracket 2: 1 rung(s), 3 trial(s), up to 8 at once" in done.stdout
    assert "Total trials: 10" in done.stdout


def assert_follows_the_plan(master: MasterProcess, exp_id: int) -> tuple[Any, dict[int, dict]]:
    """Every trial validated exactly where `simulate()` says, and reported each step once."""
    config = master.session.get(f"/experiments/{exp_id}")["experiment"]["config"]
    trials = {t["request_id"]: t for t in master.trials(exp_id)}
    # The plan for this very config: x after `length` batches is length * increment_by.
    plan = simulate(config, metric=lambda rid, hp, length: float(length * hp["increment_by"]))
    assert sorted(trials) == [t.request_id for t in plan.trials]
    for planned in plan.trials:
        trial = trials[planned.request_id]
        assert trial["state"] == "COMPLETED"
        assert trial["hparams"] == planned.hparams
        inc = planned.hparams["increment_by"]
        validations = master.series(trial["id"], "validation")
        assert validations == [(n, {"x": n * inc}) for n in planned.lengths], trial
        # Every step reported once, with x continuing across runs.
        training = master.series(trial["id"], "training")
        assert training == [(s, {"x": s * inc}) for s in range(10, planned.trained + 1, 10)]
    best_value = min(
        length * t.hparams["increment_by"] for t in plan.trials for length in t.lengths
    )
    assert (
        master.session.get(f"/experiments/{exp_id}")["experiment"]["best_validation"] == best_value
    )
    return plan, trials


@pytest.mark.slow
def test_master_killed_mid_search_still_follows_the_plan(tmp_path):
    """SIGKILL the master once the search is under way (a promotion is decided), start it
    again: the searcher resumes from its snapshot and the stored series equal a clean run's."""
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        exp_id = master.create_experiment(tutorial_config(), tutorial_context())

        def validated() -> int:
            return sum(bool(master.series(t["id"], "validation")) for t in master.trials(exp_id))

        wait_until(lambda: validated() >= 5, 120, "five rung-0 results")
        running = wait_until(
            lambda: master.db_rows("SELECT id, trial_id FROM allocations WHERE end_time IS NULL"),
            30,
            "a running trial",
        )
        master.kill()
        master.restart()
        experiment = wait_for_experiment(master, exp_id, timeout=150)
        assert experiment["state"] == "COMPLETED"
        plan, trials = assert_follows_the_plan(master, exp_id)
        # The run that was going on when the master died (unless it ended in the instant
        # between our look and the kill) was killed and resumed.
        interrupted = [
            line
            for line in master.logs(running[0]["trial_id"])
            if line.startswith(f"{running[0]['id']} was running when the master")
        ]
        ended = master.db_rows(
            "SELECT exit_code FROM allocations WHERE id = ?", (running[0]["id"],)
        )[0]["exit_code"]
        assert interrupted or ended is not None


@pytest.mark.slow
def test_tutorial_adaptive_asha_follows_the_plan(tmp_path):
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        exp_id = master.create_experiment(tutorial_config(), tutorial_context())
        experiment = wait_for_experiment(master, exp_id, timeout=150)
        assert experiment["state"] == "COMPLETED"
        plan, trials = assert_follows_the_plan(master, exp_id)

        promoted = [t for t in plan.trials if t.lengths == [25, 100]]
        assert promoted, "the plan promotes nobody: nothing is tested"
        for planned in promoted:
            trial = trials[planned.request_id]
            inc = planned.hparams["increment_by"]
            # It ran its rung-0 op, exited, and was started again by the promotion: the second
            # run restored the step-25 checkpoint and went on at batch 26.
            assert trial["run_id"] == 2
            logs = master.logs(trial["id"])
            second_run = logs[
                next(
                    i
                    for i, line in enumerate(logs)
                    if line.startswith(f"starting trial-{trial['id']}.2 ")
                )
            ]
            assert second_run
            after = logs[logs.index(second_run) :]
            first_step = next(line for line in after if "x is now" in line)
            assert first_step.endswith(f"x is now {26 * inc}"), first_step
            steps = [
                c["steps_completed"]
                for c in master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
                if c["trial_id"] == trial["id"]
            ]
            assert 25 in steps and steps.count(30) == 1

        # The best validation is the one the plan predicts: the smallest x seen.
        best_value, best_rid = min(
            (length * t.hparams["increment_by"], t.request_id)
            for t in plan.trials
            for length in t.lengths
        )
        assert experiment["best_validation"] == best_value
        assert trials[best_rid]["best_validation"]["metrics"] == {"x": best_value}
        # Among the trials that reached the top rung, the smallest increment_by wins.
        finalists = [t for t in plan.trials if t.lengths and t.lengths[-1] == 100]
        winner = min(finalists, key=lambda t: (t.hparams["increment_by"], t.request_id))
        top = min(
            (trials[t.request_id] for t in finalists),
            key=lambda t: (master.series(t["id"], "validation")[-1][1]["x"], t["request_id"]),
        )
        assert top["request_id"] == winner.request_id

        # Checkpoint GC ran at the end: per trial the best and the latest are left.
        every = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
        for planned in plan.trials:
            trial = trials[planned.request_id]
            mine = [c for c in every if c["trial_id"] == trial["id"]]
            kept = [c for c in mine if c["state"] == "COMPLETED"]
            # The latest (its last step) and the best (the validation with the smallest x,
            # the first one: x only grows) — one checkpoint when they coincide.
            assert sorted(c["steps_completed"] for c in kept) == sorted(
                {planned.lengths[0], planned.trained}
            )
            for checkpoint in mine:
                exists = pathlib.Path(checkpoint["path"]).exists()
                assert exists == (checkpoint["state"] == "COMPLETED"), checkpoint
