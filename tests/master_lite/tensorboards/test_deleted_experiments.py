"""A TensorBoard whose experiment is deleted while it runs, over a real store and a real
TensorBoard process read over HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from master_lite import errors
from master_lite.tensorboards import _tensorboards
from master_lite.tensorboards._process import runs_tensorboard_of, signal_group
from master_lite.tensorboards._tensorboards import RUNNING
from tests._support import wait_until_async
from tests._support.parts import SINGLE, settle, started_parts
from tests.master_lite.tensorboards.test_tensorboards import api


def tensorboards_of(directory) -> list[int]:
    """TensorBoard processes (our launcher) serving a log directory under `directory`."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and runs_tensorboard_of(int(entry), directory):
            pids.append(int(entry))
    return pids


def run_reaping_tensorboards(tmp_path, body) -> None:
    """Run the test body; then stop any TensorBoard it left under tmp_path (a failing test
    leaves them: nothing else stops a board the test did not kill)."""
    try:
        asyncio.run(asyncio.wait_for(body(), 150))
    finally:
        for pid in tensorboards_of(tmp_path):
            signal_group(pid, signal.SIGKILL)


@pytest.mark.slow
def test_deleting_one_of_its_experiments_leaves_a_tensorboard_following_the_others(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            boards = parts.tensorboards
            boards.refresh_seconds = 1
            gone = parts.experiments.create_experiment(SINGLE, None)
            [gone_trial] = parts.views.list_trials(gone["id"])
            kept = parts.experiments.create_experiment(SINGLE, None)
            [kept_trial] = parts.views.list_trials(kept["id"])
            for trial in (gone_trial, kept_trial):
                parts.reports.report_metrics(
                    trial["id"],
                    [{"group": "training", "steps_completed": 5, "metrics": {"loss": 0.5}}],
                )

            async def kill(experiment: dict, trial: dict) -> None:
                parts.experiments.experiment_action(experiment["id"], "kill")
                [launched] = [a for a in runner.launched if a.trial_id == trial["id"]]
                runner.exit(launched.allocation_id, 137)
                await settle(
                    lambda: parts.views.experiment_row(experiment["id"]).state == "CANCELED"
                )

            await kill(gone, gone_trial)  # finished, so that it may be deleted
            started = await boards.start([gone["id"], kept["id"]], [])
            await wait_until_async(
                lambda: boards.get(started["id"])["state"] == RUNNING,
                90,
                "TensorBoard serving",
                0.1,
            )
            base = started["serviceAddress"]

            parts.edits.delete_experiment(gone["id"])
            # The other experiment reports once more, then ends too: the board's refreshes
            # still bring its last report to TensorBoard.
            parts.reports.report_metrics(
                kept_trial["id"],
                [{"group": "training", "steps_completed": 10, "metrics": {"loss": 0.25}}],
            )
            await kill(kept, kept_trial)
            run = f"experiment_{kept['id']}/trial_{kept_trial['id']}"

            async def shows_step_10() -> bool:
                points = await api(
                    base, "/data/plugin/scalars/scalars", run=run, tag="training/loss"
                )
                return [step for _, step, _ in points] == [5, 10]

            await wait_until_async(shows_step_10, 60, "step 10 of the kept experiment shown")
            # The board follows only what still exists.
            board = boards.get(started["id"])
            assert board["experimentIds"] == [kept["id"]]
            assert board["trialIds"] == [kept_trial["id"]]
            await boards.kill(started["id"])

    run_reaping_tensorboards(tmp_path, body)


class CopyGate:
    """Holds the copy thread of a TensorBoard refresh (the file work `_write_all` does off the
    event loop) while it has metric reports to write, until released: the moment a kill can
    come in while that thread still writes into the board's directory."""

    def __init__(self, monkeypatch) -> None:
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        real = _tensorboards._write_all

        def gated(store, runs, after_id) -> int:
            new = store.metrics.page_json(tuple(runs), after_id, max_reports=1, max_bytes=1)
            held = self.armed and new != "[]"
            if held:
                self.entered.set()
                self.release.wait(120)
            try:
                return real(store, runs, after_id)
            finally:
                if held:
                    self.finished.set()

        monkeypatch.setattr(_tensorboards, "_write_all", gated)


@pytest.mark.slow
def test_a_kill_while_a_refresh_still_copies_leaves_no_directory_behind(tmp_path, monkeypatch):
    gate = CopyGate(monkeypatch)

    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            boards = parts.tensorboards
            boards.refresh_seconds = 1
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            report = {"group": "training", "steps_completed": 5, "metrics": {"loss": 0.5}}
            parts.reports.report_metrics(trial["id"], [report])
            started = await boards.start([exp["id"]], [])
            await wait_until_async(
                lambda: boards.get(started["id"])["state"] == RUNNING,
                90,
                "TensorBoard serving",
                0.1,
            )
            directory = boards._boards[started["id"]].directory
            gate.armed = True
            parts.reports.report_metrics(trial["id"], [{**report, "steps_completed": 10}])
            await wait_until_async(gate.entered.is_set, 60, "a refresh copying step 10", 0.05)

            stopped = await boards.kill(started["id"])
            assert stopped["state"] == "STATE_TERMINATED"
            gate.release.set()  # the copy goes on, into a directory the kill removed
            await wait_until_async(gate.finished.is_set, 60, "the copy done", 0.05)
            await wait_until_async(
                lambda: not directory.exists(), 30, "the board's directory removed", 0.05
            )

    run_reaping_tensorboards(tmp_path, body)


def test_a_board_killed_while_it_starts_starts_no_tensorboard(tmp_path, monkeypatch):
    gate = CopyGate(monkeypatch)
    gate.armed = True

    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            boards = parts.tensorboards
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            parts.reports.report_metrics(
                trial["id"],
                [{"group": "training", "steps_completed": 5, "metrics": {"loss": 0.5}}],
            )
            starting = asyncio.ensure_future(boards.start([exp["id"]], []))
            await wait_until_async(gate.entered.is_set, 60, "the first refresh copying", 0.05)
            [listed] = boards.list_all()
            assert listed["state"] == "STATE_STARTING"
            directory = boards._boards[listed["id"]].directory

            await boards.kill(listed["id"])  # e.g. the sidebar's stop button, while it starts
            gate.release.set()
            with pytest.raises(errors.Conflict, match="was stopped while it started"):
                await starting
            assert boards.list_all() == []
            assert tensorboards_of(directory) == []
            await wait_until_async(
                lambda: not directory.exists(), 30, "the board's directory removed", 0.05
            )

    run_reaping_tensorboards(tmp_path, body)
