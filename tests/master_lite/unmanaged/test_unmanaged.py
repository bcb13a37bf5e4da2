"""Unmanaged trials (core_v2 runs in a kernel) over a real store: open, resume, leases, ends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from master_lite import errors
from master_lite._master._wiring import Parts
from master_lite.runs import authenticate
from master_lite.unmanaged import UnmanagedRuns
from tests._support.parts import FakeRunner, run_with_parts

# Checkpoint uuids are UUIDs (the master refuses others).
CK_1 = "00000000-0000-4000-8000-0000000000c1"


class FakeClock:
    """Wall-clock time a test moves by hand (leases expire without sleeping)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def unmanaged_runs(parts, clock: FakeClock) -> UnmanagedRuns:
    return UnmanagedRuns(
        parts.shared, views=parts.views, logs=parts.logs, experiments=parts.experiments, clock=clock
    )


RUN = {
    "name": "in-kernel",
    "hparams": {"lr": 0.01, "layers": 2},
    "searcher": {"metric": "val_loss", "smaller_is_better": True},
    "external_experiment_id": "exp-a",
    "external_trial_id": "trial-1",
    "lease_seconds": 30,
    "host": "test-host pid 1",
}


def run_unmanaged(tmp_path: Path, body: Callable[..., None]) -> None:
    """`body(parts, runner, runs, clock)` over started parts, `runs` an `UnmanagedRuns` whose
    leases run on `clock`, a `FakeClock` (parts.unmanaged has the real clock)."""

    async def with_runs(parts: Parts, runner: FakeRunner) -> None:
        clock = FakeClock()
        body(parts, runner, unmanaged_runs(parts, clock), clock)

    run_with_parts(tmp_path / "root", with_runs)


def test_an_opened_run_is_an_active_unmanaged_experiment_that_stores_reports(tmp_path):
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        opened = runs.open_run(RUN)
        assert opened["resumed"] is False
        exp = parts.views.get_experiment(opened["experiment_id"])
        assert exp["unmanaged"] is True and exp["state"] == "ACTIVE"
        assert exp["config"]["hyperparameters"]["lr"] == {"type": "const", "val": 0.01}
        trial = parts.views.get_trial(opened["trial_id"])
        assert trial["state"] == "ACTIVE" and trial["hparams"] == RUN["hparams"]
        # The master launches nothing for it.
        assert runner.launched == []
        # Its token authorizes its own trial only while the trial is live.
        principal = authenticate(parts.shared.store, opened["token"], user_token="u")
        assert principal is not None and principal.trial_id == opened["trial_id"]

        reports = [{"group": "validation", "steps_completed": 5, "metrics": {"val_loss": 0.4}}]
        assert parts.reports.report_metrics(opened["trial_id"], reports) == 1
        assert runs.append_logs(opened["trial_id"], [{"line": "epoch 1", "stream": "stdout"}])
        lines = [log["line"] for log in parts.logs.get_logs(opened["trial_id"])]
        assert "epoch 1" in lines

        closed = runs.close_run(opened["trial_id"], "COMPLETED")
        assert closed["state"] == "COMPLETED"
        assert parts.views.get_experiment(opened["experiment_id"])["state"] == "COMPLETED"
        assert authenticate(parts.shared.store, opened["token"], user_token="u") is None
        with pytest.raises(errors.Conflict, match="is COMPLETED: its run was closed"):
            runs.heartbeat(opened["trial_id"])
        with pytest.raises(errors.Conflict, match="resume it with core_v2.init"):
            runs.append_logs(opened["trial_id"], [{"line": "late"}])
        # What was stored before the close stays.
        assert parts.views.get_trial(opened["trial_id"])["steps_completed"] == 5

    run_unmanaged(tmp_path, body)


def test_a_silent_kernel_loses_its_lease_and_the_trial_ends_as_error(tmp_path):
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        opened = runs.open_run(RUN)
        clock.now += 20
        assert runs.expire_leases() == []
        runs.heartbeat(opened["trial_id"])  # renewed: 30 s from now
        clock.now += 29
        assert runs.expire_leases() == []
        clock.now += 2
        assert runs.expire_leases() == [opened["trial_id"]]
        trial = parts.views.get_trial(opened["trial_id"])
        assert trial["state"] == "ERROR"
        assert "sent no heartbeat for 30 s" in trial["exit_summary"]
        assert parts.views.get_experiment(opened["experiment_id"])["state"] == "ERROR"
        master_lines = [
            log["line"]
            for log in parts.logs.get_logs(opened["trial_id"])
            if log["stream"] == "master"
        ]
        assert any("sent no heartbeat" in line for line in master_lines)
        assert runs.expire_leases() == []  # ended once

    run_unmanaged(tmp_path, body)


def test_resuming_by_external_ids_continues_the_same_trial(tmp_path):
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        first = runs.open_run(RUN)
        parts.checkpoints.report_checkpoint(
            {"uuid": CK_1, "trial_id": first["trial_id"], "metadata": {"steps_completed": 7}}
        )
        clock.now += 31
        runs.expire_leases()
        parts.experiments.experiment_action(first["experiment_id"], "archive")
        again = runs.open_run({**RUN, "hparams": {"ignored": True}})
        assert again["resumed"] is True
        assert (again["experiment_id"], again["trial_id"]) == (
            first["experiment_id"],
            first["trial_id"],
        )
        assert again["trial_run_id"] == first["trial_run_id"] + 1
        assert again["latest_checkpoint"] == CK_1
        assert again["hparams"] == RUN["hparams"]  # the trial's own, not the new ones
        assert parts.views.get_trial(first["trial_id"])["state"] == "ACTIVE"
        resumed_experiment = parts.views.get_experiment(first["experiment_id"])
        assert resumed_experiment["state"] == "ACTIVE"
        assert resumed_experiment["archived"] is False
        # The dead kernel's token no longer works; the new one does.
        store = parts.shared.store
        assert authenticate(store, first["token"], user_token="u") is None
        assert authenticate(store, again["token"], user_token="u") is not None
        # Another external trial id in the same external experiment: a second trial.
        other = runs.open_run({**RUN, "external_trial_id": "trial-2"})
        assert other["experiment_id"] == first["experiment_id"]
        assert other["trial_id"] != first["trial_id"]

    run_unmanaged(tmp_path, body)


def test_resuming_a_finished_run_is_not_a_restart(tmp_path):
    """Only a failed run's resume counts against `restarts`, as a managed trial's does: a
    core_v2 run closed cleanly and resumed later (issue 28 item 7) is not a restart."""

    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        first = runs.open_run(RUN)
        runs.close_run(first["trial_id"], "COMPLETED")
        again = runs.open_run(RUN)
        assert again["resumed"] is True
        assert parts.views.get_trial(first["trial_id"])["restarts"] == 0
        clock.now += 31
        runs.expire_leases()  # this run's kernel died: an ERROR, then a resume
        runs.open_run(RUN)
        assert parts.views.get_trial(first["trial_id"])["restarts"] == 1

    run_unmanaged(tmp_path, body)


def test_a_user_kill_ends_the_run_and_pause_is_refused(tmp_path):
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        opened = runs.open_run(RUN)
        with pytest.raises(errors.Conflict, match="trains in a Jupyter kernel"):
            parts.experiments.experiment_action(opened["experiment_id"], "pause")
        parts.experiments.experiment_action(opened["experiment_id"], "kill")
        assert parts.views.get_trial(opened["trial_id"])["state"] == "CANCELED"
        with pytest.raises(errors.Conflict, match="is CANCELED"):
            runs.heartbeat(opened["trial_id"])
        clock.now += 100
        assert runs.expire_leases() == [opened["trial_id"]]
        assert parts.views.get_trial(opened["trial_id"])["state"] == "CANCELED"

        # Killing the one trial of a run (not its experiment) ends the experiment too.
        other = runs.open_run({**RUN, "external_experiment_id": "exp-b"})
        parts.experiments.kill_trial(other["trial_id"])
        assert parts.views.get_trial(other["trial_id"])["state"] == "CANCELED"
        assert parts.views.get_experiment(other["experiment_id"])["state"] == "CANCELED"

    run_unmanaged(tmp_path, body)


def test_bad_input_is_refused_with_the_field_named(tmp_path):
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        with pytest.raises(errors.InvalidRequest, match="lease_seconds: 0.1 is out of range"):
            runs.open_run({**RUN, "lease_seconds": 0.1})
        with pytest.raises(errors.InvalidRequest, match="checkpoint_storage.bucket: required"):
            runs.open_run({**RUN, "checkpoint_storage": {"type": "s3"}})
        with pytest.raises(errors.InvalidRequest, match="hparams: expected an object"):
            runs.open_run({**RUN, "hparams": [1, 2]})
        opened = runs.open_run(RUN)
        with pytest.raises(errors.InvalidRequest, match="state: expected one of"):
            runs.close_run(opened["trial_id"], "DONE")
        assert parts.views.get_trial(opened["trial_id"])["state"] == "ACTIVE"

    run_unmanaged(tmp_path, body)


def test_recovery_after_a_master_restart_launches_nothing_for_an_open_run(tmp_path):
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        opened = runs.open_run(RUN)
        parts.recovery.recover()
        assert runner.launched == []
        assert parts.views.get_trial(opened["trial_id"])["state"] == "ACTIVE"
        # The kernel's token outlives the restart (trial tokens of runs do not).
        principal = authenticate(parts.shared.store, opened["token"], user_token="u")
        assert principal is not None and principal.trial_id == opened["trial_id"]

    run_unmanaged(tmp_path, body)


def test_a_restarted_master_gives_every_lease_a_full_period_before_expiring_it(tmp_path):
    # Issue 26 row 12: the master was down past a run's lease deadline; the kernel could not
    # renew meanwhile, so the restarted master waits a full lease for its heartbeat (and keeps
    # its reports) instead of ending the trial at start.
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        opened = runs.open_run({**RUN, "lease_seconds": 10})
        clock.now += 25  # the master was down 25 s: the stored deadline passed
        runs.start()
        assert runs.expire_leases() == []
        assert parts.views.get_trial(opened["trial_id"])["state"] == "ACTIVE"
        runs.heartbeat(opened["trial_id"])  # the kernel is back: renewed as usual
        clock.now += 10.5
        assert runs.expire_leases() == [opened["trial_id"]]  # silent a full lease: ended
        runs.stop()

    run_unmanaged(tmp_path, body)


def test_a_live_run_reads_running_not_queued(tmp_path):
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        opened = parts.unmanaged.open_run(RUN)
        trial = parts.views.get_trial(opened["trial_id"])
        assert trial["run_state"] == "RUNNING"
        assert trial["allocation_id"] == f"unmanaged-{opened['trial_id']}"
        [listed] = parts.views.list_trials(opened["experiment_id"])
        assert listed["run_state"] == "RUNNING"
        parts.unmanaged.close_run(opened["trial_id"], "COMPLETED")
        trial = parts.views.get_trial(opened["trial_id"])
        assert trial["run_state"] is None and trial["allocation_id"] is None

    run_unmanaged(tmp_path, body)


def test_reported_progress_moves_the_experiments_bar(tmp_path):
    def body(parts: Parts, runner: FakeRunner, runs: UnmanagedRuns, clock: FakeClock) -> None:
        first = parts.unmanaged.open_run(RUN)
        second = parts.unmanaged.open_run({**RUN, "external_trial_id": "trial-2"})
        parts.reports.report_progress(first["trial_id"], 0.5)
        assert parts.views.get_experiment(first["experiment_id"])["progress"] == 0.25
        parts.reports.report_progress(second["trial_id"], 1.0)
        assert parts.views.get_experiment(first["experiment_id"])["progress"] == 0.75

    run_unmanaged(tmp_path, body)
