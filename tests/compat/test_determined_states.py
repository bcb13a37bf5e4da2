"""Experiment states as Determined (0.2x+) reports them: QUEUED and RUNNING, not ACTIVE.

Determined's API shows an active experiment as RUNNING while one of its trials holds slots and
QUEUED otherwise; its e2e tests wait for `RUNNING` (`core_api/sleep` before a cancel) and, after
pausing and activating an experiment that never got slots, expect `QUEUED`. Here, on one slot,
with Determined's `core_api/sleep`-shaped fixture, through the SDK (`experiment.state`,
`reload()`, `activate()`, `list_experiments(states=...)`) and the CLI (`det e describe`,
`det e list`). The master's own `state` stays ACTIVE (JupyterLab's sidebar reads it), with
`run_state` beside it.
"""

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

SLEEP_PY = "import time\n\nfor _ in range(600):\n    time.sleep(1.0)\n"


def sleep_config(name: str) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 sleep.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "max_restarts": 0,
    }


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    root = tmp_path_factory.mktemp("states-master")
    with MasterProcess(root, cpu_slots=1, env={"MASTER_LITE_ROOT_DIR": str(root)}) as process:
        yield process


def state_of(sdk: Determined, exp_id: int) -> ExperimentState:
    experiment = sdk.get_experiment(exp_id)
    experiment.reload()
    assert experiment.state is not None
    return experiment.state


def det_cli(master: MasterProcess, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_queued_running_and_pause_activate_as_determined(
    master: MasterProcess, tmp_path: pathlib.Path
) -> None:
    sdk = Determined(master=master.url, token=master.token)
    context = tmp_path / "core_api"
    context.mkdir()
    (context / "sleep.py").write_text(SLEEP_PY)

    first = sdk.create_experiment(sleep_config("sleep-1"), context)
    wait_until(
        lambda: state_of(sdk, first.id) == ExperimentState.RUNNING, 60, "sleep-1 to be RUNNING"
    )
    # The only slot is taken: the second waits, QUEUED.
    second = sdk.create_experiment(sleep_config("sleep-2"), context)
    assert second.state == ExperimentState.QUEUED
    assert state_of(sdk, second.id) == ExperimentState.QUEUED

    # Pausing and activating an experiment that never got slots: PAUSED, then QUEUED again.
    second.pause()
    assert second.state == ExperimentState.PAUSED
    second.activate()
    assert second.state == ExperimentState.QUEUED

    # Filters: ACTIVE means every active experiment; RUNNING / QUEUED pick one kind.
    def listed(*states: ExperimentState) -> set[int]:
        return {e.id for e in sdk.list_experiments(states=list(states))} & {first.id, second.id}

    assert listed(ExperimentState.ACTIVE) == {first.id, second.id}
    assert listed(ExperimentState.RUNNING) == {first.id}
    assert listed(ExperimentState.QUEUED) == {second.id}

    # The CLI shows Determined's view; its --json keeps the master's fields.
    assert "RUNNING" in det_cli(master, "e", "describe", str(first.id))
    table = det_cli(master, "e", "list")
    assert any(f"{second.id}" in line and "QUEUED" in line for line in table.splitlines())
    raw = json.loads(det_cli(master, "e", "describe", str(second.id), "--json"))["experiment"]
    assert (raw["state"], raw["run_state"]) == ("ACTIVE", "QUEUED")

    # Its slot freed, the second runs.
    first.kill()
    assert first.wait(interval=0.2) == ExperimentState.CANCELED
    assert first.state == ExperimentState.CANCELED
    wait_until(
        lambda: state_of(sdk, second.id) == ExperimentState.RUNNING, 60, "sleep-2 to be RUNNING"
    )
    second.kill()
    assert second.wait(interval=0.2) == ExperimentState.CANCELED
