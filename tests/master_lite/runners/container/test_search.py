"""A search, pause/activate, a killed trial process and two images, all in containers (real
master, real Podman; images from `container_images`, see test_containers.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator

import pytest

from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    all_logs,
    assert_clean_series,
    marked_values,
    reported_steps,
    resumed_from,
    submit,
    wait_for_experiment,
    wait_until,
)
from tests._support.containers import (
    HOST_USR,
    containers_of,
    processes_with_env,
    remove_containers_of,
)

FILES = {"train.py": CHECKPOINTING_SCRIPT}
MARKERS = """
import json, pathlib
print("MARKERS " + json.dumps({"found": sorted(p.name for p in pathlib.Path("/").glob("image-*.txt"))}))
"""


def config(image: str, *, searcher: dict, step_sleep: float, max_restarts: int = 0) -> dict:
    return {
        "name": "containers",
        "entrypoint": "python3 train.py",
        "max_restarts": max_restarts,
        "hyperparameters": {"increment_by": {"type": "int", "minval": 1, "maxval": 8}},
        "searcher": {"metric": "x", "max_length": 100, **searcher},
        "environment": {"image": image, "environment_variables": [f"STEP_SLEEP={step_sleep}"]},
        "bind_mounts": [HOST_USR],
    }


SINGLE = {"name": "single"}


@pytest.fixture
def container_master(start_master: Callable[..., MasterProcess]) -> Iterator[MasterProcess]:
    master = start_master()
    yield master
    remove_containers_of(master.root_dir)


def test_a_search_of_four_trials_runs_in_containers(
    container_master: MasterProcess, container_images: dict[str, str]
) -> None:
    master = container_master
    searcher = {"name": "random", "max_trials": 4}
    exp_id = submit(
        master, config(container_images["a"], searcher=searcher, step_sleep=0.01), FILES
    )
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    trials = master.trials(exp_id)
    assert len(trials) == 4 and {t["state"] for t in trials} == {"COMPLETED"}
    for trial in trials:
        assert_clean_series(master, trial)
    assert containers_of(master.root_dir) == []


def test_pause_and_activate_resume_the_container_trial_from_its_checkpoint(
    container_master: MasterProcess, container_images: dict[str, str]
) -> None:
    master = container_master
    exp_id = submit(master, config(container_images["a"], searcher=SINGLE, step_sleep=0.1), FILES)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: 30 in reported_steps(master, trial["id"]), 60, "step 30")
    master.session.post(f"/experiments/{exp_id}/pause")
    wait_for_experiment(master, exp_id, {"PAUSED"})
    wait_until(lambda: master.trials(exp_id)[0]["state"] == "PAUSED", 60, "the trial to pause")
    assert containers_of(master.root_dir) == []
    (paused_at,) = [
        int(line.split()[-1])
        for line in master.logs(trial["id"])
        if line.startswith("preempted at step ")
    ]
    assert paused_at < 100, "the trial finished before the pause reached it"
    master.session.post(f"/experiments/{exp_id}/activate")
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    assert resumed_from(master, trial["id"]) == [0, paused_at]
    assert_clean_series(master, trial)
    assert containers_of(master.root_dir) == []


def test_a_killed_trial_process_in_a_container_restarts_the_trial(
    container_master: MasterProcess, container_images: dict[str, str]
) -> None:
    master = container_master
    cfg = config(container_images["a"], searcher=SINGLE, step_sleep=0.05, max_restarts=1)
    exp_id = submit(master, cfg, FILES)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: 40 in reported_steps(master, trial["id"]), 60, "step 40")
    (pid,) = processes_with_env(f"DET_ALLOCATION_ID=trial-{trial['id']}.1", ["python3", "train.py"])
    os.kill(pid, signal.SIGKILL)
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    assert trial["restarts"] == 1 and trial["run_id"] == 2
    starts = resumed_from(master, trial["id"])
    assert starts[0] == 0 and starts[1] >= 30 and starts[1] % 30 == 0, starts
    assert_clean_series(master, trial)
    assert containers_of(master.root_dir) == []


def test_two_experiments_in_two_images_see_their_own_image(
    container_master: MasterProcess, container_images: dict[str, str]
) -> None:
    master = container_master
    found = {}
    experiments = {}
    for key in ("a", "b"):
        cfg = config(container_images[key], searcher=SINGLE, step_sleep=0.01)
        cfg["entrypoint"] = "python3 markers.py && python3 train.py"
        experiments[key] = submit(master, cfg, {**FILES, "markers.py": MARKERS})
    for key, exp_id in experiments.items():
        assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
        (trial,) = master.trials(exp_id)
        (found[key],) = marked_values("\n".join(master.logs(trial["id"])), "MARKERS")
    assert found == {"a": {"found": ["image-a.txt"]}, "b": {"found": ["image-b.txt"]}}


def test_a_crashed_masters_container_is_removed_by_the_next_master(
    container_master: MasterProcess, container_images: dict[str, str]
) -> None:
    master = container_master
    cfg = config(container_images["a"], searcher=SINGLE, step_sleep=0.05, max_restarts=1)
    # The first run's container never ends by itself: only the next master can remove it. It
    # writes nothing to its (then broken) output pipe, which would end it as it ends a process
    # trial (the runtime's client proxies the SIGPIPE into the container).
    cfg["entrypoint"] = (
        'if [ "$DET_TRIAL_RUN_ID" = 1 ]; then python3 train.py > run-1.log 2>&1; '
        "exec sleep 100000; fi; python3 train.py"
    )
    exp_id = submit(master, cfg, FILES)
    (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
    wait_until(lambda: 30 in reported_steps(master, trial["id"]), 60, "step 30")
    (orphan,) = containers_of(master.root_dir)
    master.kill()  # SIGKILL: the container outlives it, as after a crash
    assert containers_of(master.root_dir) == [orphan]
    master.restart()
    state = wait_for_experiment(master, exp_id)["state"]
    assert state == "COMPLETED", all_logs(master, exp_id) + master.log_text()[-3000:]
    assert orphan not in containers_of(master.root_dir)
    (trial,) = master.trials(exp_id)
    assert resumed_from(master, trial["id"])[-1] >= 30
    assert_clean_series(master, trial)
    wait_until(lambda: containers_of(master.root_dir) == [], 30, "no containers left")
