"""`det tensorboard` end to end: a real master-lite, a real trial that reports metrics and writes
its own event files, a real TensorBoard read through its HTTP API."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest

from tests._support import MasterProcess, child_env, submit, wait_for_experiment

pytestmark = pytest.mark.slow

TRAIN_PY = """
import determined as det
from determined import core
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

with core.init() as core_context:
    # What Keras' TensorBoard callback leaves: event files under get_tensorboard_path().
    writer = EventFileWriter(str(core_context.train.get_tensorboard_path() / "train"))
    for step in (1, 2, 3):
        loss = 1.0 / step
        core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
        value = summary_pb2.Summary.Value(tag="epoch_loss", simple_value=loss * 10)
        writer.add_event(
            event_pb2.Event(step=step, wall_time=1.0, summary=summary_pb2.Summary(value=[value]))
        )
        writer.flush()
    core_context.train.report_validation_metrics(steps_completed=3, metrics={"loss": 0.5})
    writer.close()
"""

CONFIG = {
    "name": "tensorboard-e2e",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 3}},
    "hyperparameters": {},
}


def det(root: pathlib.Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(root)}),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def get_json(url: str, **query: str) -> object:
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def tensorboard_processes(tensorboard_id: str) -> list[int]:
    """Live processes whose command line names this TensorBoard (its log directory does)."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if tensorboard_id in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def test_det_tensorboard_shows_stored_metrics_and_own_files_and_stops(tmp_path):
    root = tmp_path / "root"
    with MasterProcess(root, env={"MASTER_LITE_ROOT_DIR": str(root)}) as master:
        exp_id = submit(master, CONFIG, {"train.py": TRAIN_PY})
        wait_for_experiment(master, exp_id, {"COMPLETED"})
        [trial] = master.session.get(f"/experiments/{exp_id}/trials")["trials"]
        stored = master.session.get(f"/experiments/{exp_id}/metrics")["metrics"]

        started = det(root, "tensorboard", "start", str(exp_id))
        assert started.returncode == 0, started.stdout + started.stderr
        match = re.search(r"TensorBoard is running at: (http://\S+/)", started.stdout)
        assert match, started.stdout
        url = match.group(1)

        run = f"experiment_{exp_id}/trial_{trial['id']}"
        tags = get_json(url + "data/plugin/scalars/tags")
        assert set(tags[run]) == {"training/loss", "validation/loss"}
        assert set(tags[f"{run}/train"]) == {"epoch_loss"}
        for group in ("training", "validation"):
            points = get_json(url + "data/plugin/scalars/scalars", run=run, tag=f"{group}/loss")
            expected = [
                (m["steps_completed"], m["metrics"]["loss"]) for m in stored if m["group"] == group
            ]
            assert [step for _, step, _ in points] == [step for step, _ in expected]
            # TensorBoard's scalars are float32.
            assert [v for _, _, v in points] == pytest.approx([v for _, v in expected], rel=1e-6)
        own = get_json(url + "data/plugin/scalars/scalars", run=f"{run}/train", tag="epoch_loss")
        assert [step for _, step, _ in own] == [1, 2, 3]
        assert [v for _, _, v in own] == pytest.approx([10.0, 5.0, 10 / 3], rel=1e-6)

        listed = det(root, "tensorboard", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        [board] = json.loads(listed.stdout)
        assert board["serviceAddress"] == url
        assert board["experimentIds"] == [exp_id] and board["trialIds"] == [trial["id"]]
        assert tensorboard_processes(board["id"])

        killed = det(root, "tensorboard", "kill", board["id"])
        assert killed.returncode == 0, killed.stderr
        assert f"TensorBoard {board['id']}: stopped" in killed.stdout
        assert tensorboard_processes(board["id"]) == []
        assert det(root, "tensorboard", "list", "-q").stdout == ""

        # Bad input: one line naming what is wrong.
        unknown = det(root, "tensorboard", "start", "999")
        assert unknown.returncode == 1
        assert "experiment 999 not found" in unknown.stderr
        nothing = det(root, "tensorboard", "start")
        assert nothing.returncode == 1
        assert "give experiment ids" in nothing.stderr

        # A TensorBoard still running when the master stops goes with it.
        detached = det(root, "tensorboard", "start", "-t", str(trial["id"]), "--detach")
        assert detached.returncode == 0, detached.stderr
        second = detached.stdout.strip()
        assert tensorboard_processes(second)
    assert tensorboard_processes(second) == []
