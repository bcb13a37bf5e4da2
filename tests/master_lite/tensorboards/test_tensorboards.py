"""The TensorBoards part over a real store, with a real TensorBoard process read over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from master_lite import errors
from master_lite.tensorboards._tensorboards import RUNNING, TensorBoards, own_files_dir
from tests._support import wait_until_async
from tests._support.parts import SINGLE, settle, started_parts


def scalars_api(base: str, path: str, **query: str) -> object:
    """GET `path` of the TensorBoard at `base` (its serviceAddress: standalone, the loopback
    URL with the board's secret path prefix)."""
    url = base.rstrip("/") + path
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


async def api(base: str, path: str, **query: str) -> object:
    return await asyncio.to_thread(scalars_api, base, path, **query)


def write_own_event_file(directory, tag: str, values: list[tuple[int, float]]) -> None:
    """What a trial's own TensorBoard writer leaves in checkpoint storage."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(directory))
    for step, value in values:
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
        )
        writer.add_event(event_pb2.Event(wall_time=1.0 + step, step=step, summary=summary))
    writer.close()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose but its table entry.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"


@pytest.mark.slow
def test_a_tensorboard_serves_stored_metrics_and_the_trials_own_files_then_stops(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            boards = parts.tensorboards
            boards.refresh_seconds = 1
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            trial_id = trial["id"]
            parts.reports.report_metrics(
                trial_id,
                [
                    {"group": "training", "steps_completed": 5, "metrics": {"loss": 0.5}},
                    {"group": "training", "steps_completed": 10, "metrics": {"loss": 0.25}},
                    {"group": "validation", "steps_completed": 10, "metrics": {"loss": 0.3}},
                ],
            )
            config = parts.views.experiment_row(exp["id"]).config
            own = own_files_dir(config, exp["id"], trial_id)
            (own / "train").mkdir(parents=True)
            write_own_event_file(own / "train", "epoch_accuracy", [(1, 0.75), (2, 0.875)])

            started = await boards.start([exp["id"]], [])
            board_id = started["id"]
            assert started["experimentIds"] == [exp["id"]]
            assert started["trialIds"] == [trial_id]
            await wait_until_async(
                lambda: boards.get(board_id)["state"] == RUNNING, 90, "TensorBoard serving", 0.1
            )
            base = started["serviceAddress"]
            run = f"experiment_{exp['id']}/trial_{trial_id}"
            tags = await api(base, "/data/plugin/scalars/tags")
            assert set(tags[run]) == {"training/loss", "validation/loss"}
            assert set(tags[f"{run}/train"]) == {"epoch_accuracy"}
            training = await api(base, "/data/plugin/scalars/scalars", run=run, tag="training/loss")
            assert [(step, value) for _, step, value in training] == [(5, 0.5), (10, 0.25)]
            own_points = await api(
                base, "/data/plugin/scalars/scalars", run=f"{run}/train", tag="epoch_accuracy"
            )
            assert [(step, value) for _, step, value in own_points] == [(1, 0.75), (2, 0.875)]

            # The trial is still running: what it reports later reaches TensorBoard.
            parts.reports.report_metrics(
                trial_id,
                [{"group": "training", "steps_completed": 15, "metrics": {"loss": 0.125}}],
            )

            async def has_step_15() -> bool:
                points = await api(
                    base, "/data/plugin/scalars/scalars", run=run, tag="training/loss"
                )
                return [step for _, step, _ in points][-1:] == [15]

            await wait_until_async(has_step_15, 60, "step 15 shown by TensorBoard")

            assert [b["id"] for b in boards.list_all()] == [board_id]
            pid = boards._boards[board_id].process.pid
            directory = boards._boards[board_id].directory
            stopped = await boards.kill(board_id)
            assert stopped["state"] == "STATE_TERMINATED"
            assert not process_alive(pid)
            assert not directory.exists()
            assert boards.list_all() == []
            with pytest.raises(errors.NotFound, match=f"tensorboard {board_id} not found"):
                boards.get(board_id)

    asyncio.run(asyncio.wait_for(body(), 150))


def test_bad_requests_say_what_is_wrong_and_start_nothing(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            boards = parts.tensorboards
            with pytest.raises(errors.InvalidRequest, match="at least one experiment or trial"):
                await boards.start([], [])
            with pytest.raises(errors.NotFound, match="experiment 99 not found"):
                await boards.start([99], [])
            with pytest.raises(errors.NotFound, match="trial 42 not found"):
                await boards.start([], [42])

            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            parts.experiments.experiment_action(exp["id"], "kill")
            runner.exit(runner.launched[0].allocation_id, 137)
            await settle(lambda: parts.views.trial_row(trial["id"]).state == "CANCELED")
            with pytest.raises(
                errors.InvalidRequest,
                match=f"trial {trial['id']} is CANCELED and has no metrics and no TensorBoard",
            ):
                await boards.start([], [trial["id"]])

            boards.module = "tensorboard_that_is_not_installed"
            with pytest.raises(errors.Unavailable, match="is not installed in the master's"):
                await boards.start([exp["id"]], [])
            assert boards.list_all() == []
            assert not (tmp_path / "root" / "tensorboards").exists() or not any(
                (tmp_path / "root" / "tensorboards").iterdir()
            )

    asyncio.run(asyncio.wait_for(body(), 60))


def _proc_status(pid: int) -> str:
    """What /proc says of `pid` (state line and command line), for a failure message."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()[:3]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError as exc:
        return f"pid {pid}: {exc}"
    return f"pid {pid}: {'; '.join(status)}; cmdline {cmdline!r}"


@pytest.mark.slow
def test_a_new_master_stops_the_tensorboards_a_killed_master_left_running(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            exp = parts.experiments.create_experiment(SINGLE, None)
            [trial] = parts.views.list_trials(exp["id"])
            parts.reports.report_metrics(
                trial["id"],
                [{"group": "training", "steps_completed": 1, "metrics": {"loss": 1.0}}],
            )
            started = await parts.tensorboards.start([], [trial["id"]])
            board = parts.tensorboards._boards[started["id"]]
            board.watcher.cancel()  # the killed master's part does nothing more
            pid = board.process.pid
            assert process_alive(pid)

            # The next master over this root dir: a part that never heard of that TensorBoard.
            after_restart = TensorBoards(parts.shared, parts.views)
            after_restart.remove_leftovers()
            await wait_until_async(
                lambda: not process_alive(pid),
                60,
                "the leftover to exit",
                details=lambda: _proc_status(pid),
            )
            assert not board.directory.exists()
            assert after_restart.list_all() == []
            board.process.wait()

    asyncio.run(asyncio.wait_for(body(), 60))
