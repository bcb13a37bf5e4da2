"""Fault tolerance end to end, on a real `python -m master_lite` and real trial processes.

* a trial SIGKILLed mid-run is restarted from its latest checkpoint;
* the master SIGKILLed mid-search and started again on the same root dir kills the orphaned
  trial processes and finishes the search;
* a clean master stop (SIGTERM) pauses running trials and the next start resumes them;
and in every case the stored metric series is exactly a clean run's: steps redone after a
checkpoint replace the earlier reports instead of duplicating them.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from master_lite._core import MetricsQuery, _auth
from master_lite._master import Master
from master_lite.runners.process import _orphans as _recovery
from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    assert_clean_series,
    context_tarball,
    reported_steps,
    resumed_from,
    wait_for_experiment,
    wait_until,
)

CONTEXT = context_tarball({"train.py": CHECKPOINTING_SCRIPT})


def config(searcher: str, *, max_restarts: int = 0) -> str:
    return f"""
name: recovery
entrypoint: python3 train.py
max_restarts: {max_restarts}
hyperparameters:
  increment_by: {{type: int, minval: 1, maxval: 8}}
searcher: {searcher}
environment:
  environment_variables: ["STEP_SLEEP=0.04"]
"""


def running_pids(master: MasterProcess, trial_id: int | None = None) -> list[int]:
    sql = "SELECT pid FROM allocations WHERE end_time IS NULL AND pid IS NOT NULL"
    params: tuple = ()
    if trial_id is not None:
        sql += " AND trial_id = ?"
        params = (trial_id,)
    return [row["pid"] for row in master.db_rows(sql, params)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.slow
def test_killed_trial_restarts_from_its_latest_checkpoint(tmp_path):
    with MasterProcess(tmp_path / "root") as master:
        exp_id = master.create_experiment(
            config("{name: single, metric: x}", max_restarts=1), CONTEXT
        )
        (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
        # Past the checkpoint at 30 and already reported 40: the restart must redo 40.
        wait_until(lambda: 40 in reported_steps(master, trial["id"]), 60, "step 40")
        (pid,) = running_pids(master, trial["id"])
        os.killpg(pid, 9)

        experiment = wait_for_experiment(master, exp_id)
        assert experiment["state"] == "COMPLETED"
        (trial,) = master.trials(exp_id)
        assert trial["restarts"] == 1 and trial["run_id"] == 2
        starts = resumed_from(master, trial["id"])
        assert starts[0] == 0 and starts[1] >= 30 and starts[1] % 30 == 0, starts
        assert_clean_series(master, trial)
        # The redone steps were reported twice; only the later report is in the series.
        superseded = master.db_rows(
            "SELECT steps_completed, trial_run_id FROM metrics WHERE superseded_by_run = 2"
        )
        assert superseded and all(
            row["trial_run_id"] == 1 and row["steps_completed"] > starts[1] for row in superseded
        ), superseded


@pytest.mark.slow
def test_master_killed_mid_search_resumes_and_matches_a_clean_run(tmp_path):
    root = tmp_path / "root"
    with MasterProcess(root) as master:
        exp_id = master.create_experiment(
            config("{name: random, metric: x, max_trials: 3, max_concurrent_trials: 2}"), CONTEXT
        )
        wait_until(lambda: len(master.trials(exp_id)) == 2, 30, "two trials")
        first = master.trials(exp_id)[0]
        wait_until(lambda: 40 in reported_steps(master, first["id"]), 60, "step 40")
        orphans = running_pids(master)
        assert orphans
        master.kill()
        assert all(alive(pid) for pid in orphans), "the trials died with the master"

        master.restart()
        # The new master found the old runs by their session tokens and killed them.
        wait_until(lambda: not any(alive(pid) for pid in orphans), 15, "orphans to be killed")
        experiment = wait_for_experiment(master, exp_id, timeout=120)
        assert experiment["state"] == "COMPLETED"
        trials = master.trials(exp_id)
        assert len(trials) == 3  # the searcher's state survived: no trial lost or repeated
        assert [t["request_id"] for t in trials] == [1, 2, 3]
        for trial in trials:
            assert trial["state"] == "COMPLETED"
            assert_clean_series(master, trial)
        first = trials[0]
        assert first["run_id"] == 2 and first["restarts"] == 0  # the master's fault, not its
        assert any(
            "processes" in line and "were killed" in line for line in master.logs(first["id"])
        )
        assert resumed_from(master, first["id"])[1] >= 30


@pytest.mark.slow
def test_clean_master_stop_pauses_trials_and_the_next_start_resumes_them(tmp_path):
    root = tmp_path / "root"
    with MasterProcess(root) as master:
        exp_id = master.create_experiment(config("{name: single, metric: x}"), CONTEXT)
        (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
        wait_until(lambda: 20 in reported_steps(master, trial["id"]), 60, "step 20")
        assert master.stop() == 0
        (stored,) = master.db_rows("SELECT state, latest_checkpoint FROM trials")
        assert stored["state"] == "PAUSED"
        (paused_at,) = [
            row["steps_completed"]
            for row in master.db_rows(
                "SELECT steps_completed FROM checkpoints WHERE uuid = ?",
                (stored["latest_checkpoint"],),
            )
        ]
        assert paused_at < 100, "the trial finished before the stop reached it"

        master.restart()
        experiment = wait_for_experiment(master, exp_id)
        assert experiment["state"] == "COMPLETED"
        (trial,) = master.trials(exp_id)
        assert trial["run_id"] == 2 and trial["restarts"] == 0
        assert resumed_from(master, trial["id"]) == [0, paused_at]
        assert f"preempted at step {paused_at}" in master.logs(trial["id"])
        assert_clean_series(master, trial)


# -- the pieces, without processes of a master ------------------------------------------------
def test_orphans_are_found_by_their_session_token_only():
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours = subprocess.Popen(
        sleeper, env={**os.environ, "DET_SESSION_TOKEN": "trial.ours"}, start_new_session=True
    )
    # Same allocation id and a token of another master: not ours to kill.
    theirs = subprocess.Popen(
        sleeper,
        env={**os.environ, "DET_SESSION_TOKEN": "trial.theirs", "DET_ALLOCATION_ID": "trial-1.1"},
        start_new_session=True,
    )
    try:
        tokens = {_auth.hash_token("trial.ours"): "trial-1.1"}
        assert _recovery.find_runs_by_token(tokens, hash_token=_auth.hash_token) == {
            "trial-1.1": [ours.pid]
        }
        assert _recovery.end_orphaned_runs(tokens, hash_token=_auth.hash_token) == {
            "trial-1.1": [ours.pid]
        }
        assert ours.wait(10) == -9
        assert theirs.poll() is None
        assert _recovery.find_runs_by_token(tokens, hash_token=_auth.hash_token) == {}
    finally:
        for process in (ours, theirs):
            process.kill()
            process.wait()


def test_a_later_run_supersedes_reports_of_earlier_runs(tmp_path):
    async def body():
        master = Master(tmp_path / "root", cpu_slots=1, gpus=[])
        await master.start("http://127.0.0.1:9")
        try:
            exp_id = master.experiments.create_experiment(
                {
                    "name": "dedupe",
                    "entrypoint": "python3 -c pass",
                    "searcher": {"name": "single", "metric": "loss"},
                },
                None,
                activate=False,
            )["id"]
            (trial,) = master.views.list_trials(exp_id)

            def report(run, group, steps, loss):
                return master.reports.report_metrics(
                    trial["id"],
                    [
                        {
                            "group": group,
                            "steps_completed": steps,
                            "trial_run_id": run,
                            "metrics": {"loss": loss},
                        }
                    ],
                )

            for steps in (10, 20, 30):
                report(1, "training", steps, steps / 10)
            report(1, "validation", 30, 0.1)  # the best so far, then lost with the run
            assert report(1, "training", 30, 3.0) == 1  # a retried POST: accepted, not stored
            # Run 2 resumed from a checkpoint at 20 and redoes 30 (its values differ).
            report(2, "training", 30, 3.5)
            report(2, "validation", 30, 0.4)
            report(2, "training", 40, 4.5)

            series = [
                (m["steps_completed"], m["metrics"]["loss"], m["trial_run_id"])
                for m in master.views.get_metrics(
                    MetricsQuery(trial_id=trial["id"], group="training")
                )
            ]
            assert series == [(10, 1.0, 1), (20, 2.0, 1), (30, 3.5, 2), (40, 4.5, 2)]
            current = master.views.get_trial(trial["id"])
            assert current["best_validation"]["metrics"] == {"loss": 0.4}
            assert current["latest_validation"]["metrics"] == {"loss": 0.4}
            assert master.views.best_validation(exp_id) == 0.4
            # Kept, but out of the series.
            hidden = master.store.metric_rows(
                "trial_id = ? AND superseded_by_run = 2", (trial["id"],), include_superseded=True
            )
            assert sorted((m["group"], m["steps_completed"]) for m in hidden) == [
                ("training", 30),
                ("validation", 30),
            ]
            # Within one run two different reports of a step are both the script's business.
            report(2, "validation", 40, 0.3)
            report(2, "validation", 40, 0.2)
            assert [
                m["metrics"]["loss"]
                for m in master.views.get_metrics(
                    MetricsQuery(trial_id=trial["id"], group="validation")
                )
            ] == [0.4, 0.3, 0.2]
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 60))
