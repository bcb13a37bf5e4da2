"""`det task`: the trials (and TensorBoards) on slots as Determined's tasks; generic tasks
refused with what to use instead."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from determined.experimental.client import Determined, ExperimentState
from tests._support import MasterProcess, child_env, wait_until

pytestmark = pytest.mark.slow

SLEEP_PY = "import time\nprint('sleeping', flush=True)\nfor _ in range(600):\n    time.sleep(1.0)\n"


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    root = tmp_path_factory.mktemp("task-master")
    with MasterProcess(root, cpu_slots=1, env={"MASTER_LITE_ROOT_DIR": str(root)}) as process:
        yield process


def det(master: MasterProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_task_list_logs_and_kill_of_trials(master: MasterProcess, tmp_path: pathlib.Path) -> None:
    sdk = Determined(master=master.url, token=master.token)
    (tmp_path / "sleep.py").write_text(SLEEP_PY)
    config = {
        "name": "sleeper",
        "entrypoint": "python3 sleep.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "max_restarts": 0,
    }
    running = sdk.create_experiment(config, tmp_path)
    queued = sdk.create_experiment({**config, "name": "waiter"}, tmp_path)
    (running_trial,) = running.list_trials()
    (queued_trial,) = queued.list_trials()
    wait_until(
        lambda: any("sleeping" in line for line in running_trial.iter_logs()), 60, "the sleeper"
    )

    listed = det(master, "task", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    tasks = json.loads(listed.stdout)
    first, second = tasks[f"trial-{running_trial.id}"], tasks[f"trial-{queued_trial.id}"]
    assert first["allocationId"] and first["agent"] == "slots 0" and first["slotsNeeded"] == 1
    assert (second["allocationId"], second["agent"]) == ("", "unassigned")
    table = det(master, "task", "list")
    assert "Task ID" in table.stdout and f"trial-{running_trial.id}" in table.stdout

    logs = det(master, "task", "logs", f"trial-{running_trial.id}")
    assert logs.returncode == 0 and "sleeping" in logs.stdout
    bad = det(master, "task", "logs", "not-a-task")
    assert bad.returncode == 2 and "trial-<id>" in bad.stderr

    killed = det(master, "task", "kill", f"trial-{running_trial.id}")
    assert killed.returncode == 0, killed.stderr
    wait_until(
        lambda: (
            running_trial.id
            not in [t.id for t in running.list_trials() if t.state.name == "ACTIVE"]
        ),
        60,
        "the killed trial to end",
    )
    queued.kill()
    assert queued.wait(interval=0.2) == ExperimentState.CANCELED


def test_generic_tasks_are_refused_with_what_to_use(master: MasterProcess) -> None:
    refused = det(master, "task", "create", "python3 train.py")
    assert refused.returncode == 2
    assert "generic tasks are not supported" in refused.stderr
    assert "as an experiment" in refused.stderr
