"""A sample of what Determined's own e2e tests check, against a real master-lite.

Determined's e2e tests drive a "noop" trial: a Core API script that performs the actions listed
in its `hyperparameters.actions` (report training/validation metrics, checkpoint, sleep, exit
with a code), resumes after its latest checkpoint, and checks for preemption after every action.
`NOOP_PY` below is such a script, written here the same way; `actions()` builds the config as
Determined's `noop.generate_config` does. The checks, with what Determined's tests expect:

* states: an experiment whose trial holds the slot is RUNNING, one waiting for it QUEUED; both
  end COMPLETED (Determined 0.2x+ `experimentv1State`);
* restarts: `max_restarts: 2` with a trial that exits 1 runs three times, then the experiment is
  ERROR with the trial's `restarts` at 2;
* checkpoint GC: ten train-validate-checkpoint steps with `save_experiment_best: 3`,
  `save_trial_latest: 2` keep the checkpoints at steps {8, 9, 10} when the metric improves
  (x0.9 per step) and {1, 2, 3, 9, 10} when it worsens (x1.1), the others DELETED
  (Determined's `test_gc_checkpoints`);
* pause / activate / cancel: a running experiment pauses (its trial checkpoints and stops),
  activates (the trial resumes from that checkpoint), cancels to CANCELED; an experiment
  cancelled right after it is created ends CANCELED (`test_cancel_experiment`);
* `det e create --test-mode`: a good context passes and nothing is kept; a trial that exits 99
  fails it, and the logs say `resources failed with non-zero exit code`.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from determined.experimental.client import Determined, ExperimentState
from tests._support import MasterProcess, child_env, trials, wait_until

pytestmark = pytest.mark.slow

NOOP_PY = """
import logging
import os
import pathlib
import sys
import time

import determined as det
from determined import core


def restore(core_context, trial_id, latest_checkpoint):
    if latest_checkpoint is None:
        return 0, 0
    with core_context.checkpoint.restore_path(latest_checkpoint) as path:
        action, steps, owner = (int(v) for v in (path / "state").read_text().split(","))
    return (action + 1, steps) if owner == trial_id else (0, 0)


def save(core_context, action, steps, trial_id):
    with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, _):
        (path / "state").write_text(f"{action},{steps},{trial_id}")


def main(core_context, trial_id, actions, latest_checkpoint):
    start, steps = restore(core_context, trial_id, latest_checkpoint)
    for index, action in enumerate(actions[start:], start=start):
        kind = action["action"]
        if kind == "exit":
            sys.exit(action["code"])
        elif kind == "sleep":
            time.sleep(action["time"])
        elif kind == "gate":  # wait for the test to open it, as a long sleep would, but exactly
            while not os.path.exists(action["path"]) and not core_context.preempt.should_preempt():
                time.sleep(0.05)
        elif kind == "report":
            if action["group"] == "training":
                steps += 1
            core_context.train.report_metrics(action["group"], steps, action["metrics"])
        elif kind == "checkpoint":
            save(core_context, index, steps, trial_id)
        if core_context.preempt.should_preempt():
            if kind != "checkpoint":
                save(core_context, index, steps, trial_id)
            return


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    actions = [a for _, a in sorted(info.trial.hparams["actions"].items(), key=lambda i: int(i[0]))]
    with core.init() as core_context:
        main(core_context, info.trial.trial_id, actions, info.latest_checkpoint)
"""


def actions(*steps: dict, **config: Any) -> dict:
    """The experiment config of a noop trial doing `steps` (Determined's noop layout)."""
    base: dict[str, Any] = {
        "name": "noop",
        "entrypoint": "python3 train.py",
        "hyperparameters": {"actions": {str(i): a for i, a in enumerate(steps, start=1)}},
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
    }
    base.update(config)
    return base


def report(x: float, group: str = "training") -> dict:
    return {"action": "report", "group": group, "metrics": {"x": x}}


CHECKPOINT = {"action": "checkpoint"}


def gate(path: pathlib.Path) -> dict:
    return {"action": "gate", "path": str(path)}


def traininglike_steps(n: int, scale: float = 1.0) -> list[dict]:
    out: list[dict] = []
    metric = 1.0
    for _ in range(n):
        out += [report(metric), report(metric, "validation"), CHECKPOINT]
        metric *= scale
    return out


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    root = tmp_path_factory.mktemp("e2e-sample-master")
    with MasterProcess(root, cpu_slots=1, env={"MASTER_LITE_ROOT_DIR": str(root)}) as process:
        yield process


@pytest.fixture(scope="module")
def noop_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("noop")
    (directory / "train.py").write_text(NOOP_PY)
    return directory


@pytest.fixture(scope="module")
def sdk(master: MasterProcess) -> Determined:
    return Determined(master=master.url, token=master.token)


def state_of(sdk: Determined, exp_id: int) -> ExperimentState:
    experiment = sdk.get_experiment(exp_id)
    experiment.reload()
    assert experiment.state is not None
    return experiment.state


def wait_state(sdk: Determined, exp_id: int, state: ExperimentState, timeout: float = 120) -> None:
    wait_until(lambda: state_of(sdk, exp_id) == state, timeout, f"experiment {exp_id} {state}")


def test_states_queued_running_completed(
    sdk: Determined, noop_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    opened = tmp_path / "open"
    first = sdk.create_experiment(actions(gate(opened), *traininglike_steps(1)), noop_dir)
    wait_state(sdk, first.id, ExperimentState.RUNNING)
    second = sdk.create_experiment(actions(*traininglike_steps(1)), noop_dir)
    assert state_of(sdk, second.id) == ExperimentState.QUEUED  # the only slot is taken
    opened.touch()
    assert first.wait(interval=0.1) == ExperimentState.COMPLETED
    assert second.wait(interval=0.1) == ExperimentState.COMPLETED


def test_max_restarts_runs_a_failing_trial_again_then_errors(
    master: MasterProcess, sdk: Determined, noop_dir: pathlib.Path
) -> None:
    config = actions(report(1.0), {"action": "exit", "code": 1}, max_restarts=2)
    experiment = sdk.create_experiment(config, noop_dir)
    assert experiment.wait(interval=0.1) == ExperimentState.ERROR
    (trial,) = trials(master, experiment.id)
    assert trial["restarts"] == 2
    # Three runs, each ending in Determined's words.
    failed = [line for line in master.logs(trial["id"]) if "non-zero exit code: 1" in line]
    assert len(failed) == 3, master.logs(trial["id"])


@pytest.mark.parametrize(
    ("scale", "kept"), [(0.9, {8, 9, 10}), (1.1, {1, 2, 3, 9, 10})], ids=["improving", "worsening"]
)
def test_checkpoint_gc_keeps_what_the_policy_says(
    master: MasterProcess,
    sdk: Determined,
    noop_dir: pathlib.Path,
    scale: float,
    kept: set[int],
) -> None:
    storage = {"save_experiment_best": 3, "save_trial_latest": 2}
    config = actions(*traininglike_steps(10, scale))
    config["checkpoint_storage"] = storage
    experiment = sdk.create_experiment(config, noop_dir)
    assert experiment.wait(interval=0.1) == ExperimentState.COMPLETED

    def by_state() -> dict[str, set[int]] | None:
        rows = master.session.get(f"/experiments/{experiment.id}/checkpoints")["checkpoints"]
        found: dict[str, set[int]] = {}
        for row in rows:
            found.setdefault(row["state"], set()).add(row["steps_completed"])
        wanted = {"COMPLETED": kept, "DELETED": set(range(1, 11)) - kept}
        return found if found == wanted else None

    wait_until(by_state, 60, f"checkpoints {sorted(kept)} kept, the others deleted")
    # What the SDK lists (the COMPLETED ones) agrees.
    listed = experiment.list_checkpoints()
    assert {(c.metadata or {})["steps_completed"] for c in listed} == kept


def test_pause_activate_and_cancel(
    master: MasterProcess, sdk: Determined, noop_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    opened = tmp_path / "open"
    config = actions(report(1.0), gate(opened), report(0.5), report(0.5, "validation"))
    experiment = sdk.create_experiment(config, noop_dir)
    (trial_id,) = [
        t["id"] for t in wait_until(lambda: trials(master, experiment.id), 60, "a trial")
    ]
    wait_until(lambda: master.series(trial_id, "training"), 60, "the first report")
    experiment.pause()
    wait_state(sdk, experiment.id, ExperimentState.PAUSED)
    # Preempted at the gate, the trial saved where it was.
    wait_until(lambda: trials(master, experiment.id)[0]["latest_checkpoint"], 60, "a checkpoint")
    opened.touch()
    experiment.activate()
    assert experiment.wait(interval=0.1) == ExperimentState.COMPLETED
    # Resumed after its checkpoint: the first step was not reported twice.
    assert [steps for steps, _ in master.series(trial_id, "training")] == [1, 2]

    cancelled = sdk.create_experiment(actions(gate(tmp_path / "never")), noop_dir)
    cancelled.cancel()
    assert cancelled.wait(interval=0.1) == ExperimentState.CANCELED


def _det(master: MasterProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_test_mode_passes_a_good_context_and_fails_an_exit_99(
    master: MasterProcess, noop_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(json.dumps(actions(*traininglike_steps(2))))
    done = _det(master, "e", "create", "--test-mode", str(good), str(noop_dir))
    assert done.returncode == 0, done.stdout + done.stderr

    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps(actions(report(1.0), {"action": "exit", "code": 99})))
    done = _det(master, "e", "create", "--test-mode", str(bad), str(noop_dir))
    assert done.returncode != 0
    assert "resources failed with non-zero exit code" in done.stdout + done.stderr
