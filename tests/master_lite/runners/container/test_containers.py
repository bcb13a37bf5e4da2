"""Trials in containers (`environment.image`), end to end: a real master, real Podman.

Images are the tiny session images of `container_images` (empty directories plus a marker
file), run with the host's /usr bind-mounted read-only for python3; the harness reaches the
trial through the master's own bind mount, not through the image.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from determined.common.api import errors as api_errors
from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    clean_series,
    context_tarball,
    marked_values,
    submit,
    wait_for_experiment,
    wait_until,
)
from tests._support.containers import (
    HOST_USR,
    containers_of,
    remove_containers_of,
)

PROBE = """
import json, os, pathlib, sys
import determined
print("PROBE " + json.dumps({
    "determined": determined.__file__,
    "markers": sorted(p.name for p in pathlib.Path("/").glob("image-*.txt")),
    "hook": os.environ.get("FROM_HOOK"),
    "my_var": os.environ.get("MY_VAR"),
    "cwd": os.getcwd(),
    "virtual_env": os.environ.get("VIRTUAL_ENV"),
    "python": sys.executable,
    "shm_bytes": os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize,
    "device": os.path.exists("/dev/det-null"),
}), flush=True)
"""


def config(image: str, *, entrypoint: str = "python3 probe.py && python3 train.py", **more) -> dict:
    return {
        "name": "in-a-container",
        "entrypoint": entrypoint,
        "max_restarts": 0,
        "hyperparameters": {"increment_by": 2},
        "searcher": {"name": "single", "metric": "x", "max_length": 100},
        "environment": {
            "image": image,
            "environment_variables": ["MY_VAR=hello", "STEP_SLEEP=0.01"],
        },
        "bind_mounts": [HOST_USR],
        **more,
    }


@pytest.fixture
def container_master(
    start_master: Callable[..., MasterProcess],
) -> Iterator[MasterProcess]:
    master = start_master()
    yield master
    remove_containers_of(master.root_dir)


def probe(master: MasterProcess, trial_id: int) -> dict:
    (found,) = marked_values("\n".join(master.logs(trial_id)), "PROBE")
    return found


def test_core_api_trial_runs_in_its_image_with_metrics_checkpoints_and_logs(
    container_master: MasterProcess, container_images: dict[str, str]
) -> None:
    master = container_master
    files = {
        "probe.py": PROBE,
        "train.py": CHECKPOINTING_SCRIPT,
        "startup-hook.sh": "export FROM_HOOK=sourced\n",
    }
    resources = {"devices": ["/dev/null:/dev/det-null"], "shm_size": "256m"}
    exp_id = submit(master, config(container_images["a"], resources=resources), files)
    experiment = wait_for_experiment(master, exp_id)
    assert experiment["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    found = probe(master, trial["id"])
    # The harness came from the master's read-only mount; the image had only its marker.
    assert found["determined"] == "/opt/determined-harness/determined/__init__.py"
    assert found["markers"] == ["image-a.txt"]
    assert found["hook"] == "sourced" and found["my_var"] == "hello"
    assert found["cwd"] == str(master.root_dir / "trials" / str(trial["id"]) / "run-1")
    assert found["virtual_env"] is None, "the master's environment leaked into the container"
    assert found["device"] and found["shm_bytes"] == 256 * 1024**2
    assert master.series(trial["id"], "training") == clean_series(2)["training"]
    assert master.series(trial["id"], "validation") == clean_series(2)["validation"]
    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    (last,) = [c for c in checkpoints if c["steps_completed"] == 100]
    stored = master.root_dir / "checkpoints" / last["uuid"] / "state"
    assert stored.read_text() == f"200,100,{trial['id']}"
    logs = master.logs(trial["id"])
    assert any("in a container of " + container_images["a"] in line for line in logs)
    # The harness's own dependencies (requests for its long polls) came with it.
    assert not [line for line in logs if "failed" in line or "Warning" in line], logs
    assert containers_of(master.root_dir) == []


def test_exit_codes_come_from_the_container_and_a_killed_trial_leaves_nothing(
    container_master: MasterProcess, container_images: dict[str, str]
) -> None:
    master = container_master
    failing = submit(
        master,
        config(container_images["a"], entrypoint="python3 -c 'import sys; sys.exit(3)'"),
        {"x.py": ""},
    )
    assert wait_for_experiment(master, failing)["state"] == "ERROR"
    (trial,) = master.trials(failing)
    assert trial["state"] == "ERROR"
    assert trial["exit_code"] == 3

    sleeper = submit(
        master,
        config(
            container_images["a"],
            entrypoint="echo started; exec python3 -c 'import time; time.sleep(600)'",
        ),
        {"x.py": ""},
    )
    (trial,) = wait_until(lambda: master.trials(sleeper), 30, "the trial")
    wait_until(lambda: "started" in master.logs(trial["id"]), 60, "the container to start")
    names = containers_of(master.root_dir)
    assert len(names) == 1 and names[0].endswith(f"-trial-{trial['id']}.1"), names
    master.session.post(f"/experiments/{sleeper}/kill")
    assert wait_for_experiment(master, sleeper)["state"] == "CANCELED"
    wait_until(lambda: containers_of(master.root_dir) == [], 60, "the container to be removed")


def test_image_without_python3_fails_the_trial_naming_the_image(
    container_master: MasterProcess,
) -> None:
    master = container_master
    # The tiny image without the host's /usr: no python3, no shell either.
    from tests._support.containers import TEST_PREFIX, build_tiny_image, remove_images

    bare = build_tiny_image(f"{TEST_PREFIX}-bare")
    try:
        cfg = config(bare, bind_mounts=[])
        cfg["bind_mounts"] = [
            {"host_path": "/usr/bin/dash", "container_path": "/usr/bin/sh", "read_only": True},
            {"host_path": "/usr/lib", "container_path": "/usr/lib", "read_only": True},
            {"host_path": "/usr/lib64", "container_path": "/usr/lib64", "read_only": True},
        ]
        exp_id = submit(master, cfg, {"x.py": ""})
        assert wait_for_experiment(master, exp_id)["state"] == "ERROR"
        (trial,) = master.trials(exp_id)
        assert trial["exit_code"] == 127
        text = "\n".join(master.logs(trial["id"]))
        assert f"the container image {bare} has no python3" in text
    finally:
        remove_containers_of(master.root_dir)
        remove_images([bare])


def test_bad_images_and_mounts_are_refused_at_submit(
    container_master: MasterProcess, container_images: dict[str, str], tmp_path: Path
) -> None:
    master = container_master
    missing = str(tmp_path / "no-such-dir")
    cfg = config("localhost/jd-no-such-image:1", bind_mounts=[HOST_USR])
    cfg["environment"]["image"] = {
        "cpu": "localhost/jd-no-such-image:1",
        "cuda": container_images["a"],
    }
    cfg["bind_mounts"] = [{"host_path": missing, "container_path": "/data"}]
    with pytest.raises(api_errors.APIError) as info:
        submit(master, cfg, {"x.py": ""})
    message = str(info.value)
    assert "environment.image.cpu: image 'localhost/jd-no-such-image:1' is not in podman" in message
    assert "environment.image.cuda" not in message
    assert f"bind_mounts[0].host_path: '{missing}' does not exist on this machine" in message
    assert master.session.get("/experiments")["experiments"] == []


def test_a_runtime_that_is_not_installed_is_refused_at_submit(
    start_master: Callable[..., MasterProcess], container_images: dict[str, str], tmp_path: Path
) -> None:
    master = start_master(env={"MASTER_LITE_CONTAINER_RUNTIME": str(tmp_path / "no-podman")})
    with pytest.raises(api_errors.APIError) as info:
        submit(master, config(container_images["a"]), {"x.py": ""})
    assert f"the container runtime '{tmp_path / 'no-podman'}' is not installed" in str(info.value)
    # Experiments without an image never need the runtime: they run as local processes.
    local = {**config(""), "environment": {"environment_variables": ["MY_VAR=local"]}}
    del local["bind_mounts"]
    exp_id = submit(master, local, {"probe.py": PROBE, "train.py": CHECKPOINTING_SCRIPT})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    found = probe(master, trial["id"])
    assert found["markers"] == [] and found["my_var"] == "local"
    assert found["determined"] != "/opt/determined-harness/determined/__init__.py"


def test_a_trial_that_ignores_a_pause_is_stopped_and_its_container_removed(
    start_master: Callable[..., MasterProcess], container_images: dict[str, str]
) -> None:
    master = start_master(env={"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "1"})
    try:
        entrypoint = "echo started; exec python3 -c 'import time; time.sleep(600)'"
        exp_id = submit(master, config(container_images["a"], entrypoint=entrypoint), {"x.py": ""})
        (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
        wait_until(lambda: "started" in master.logs(trial["id"]), 60, "the container to start")
        master.session.post(f"/experiments/{exp_id}/pause")
        wait_until(lambda: master.trials(exp_id)[0]["state"] == "PAUSED", 60, "the trial to pause")
        wait_until(lambda: containers_of(master.root_dir) == [], 60, "the container to go")
        # SIGTERM through the runtime's stop (143), not a SIGKILL of its client (-9 -> 137).
        (run,) = master.db_rows("SELECT exit_code FROM allocations")
        assert run["exit_code"] == 143
    finally:
        remove_containers_of(master.root_dir)


def test_a_runtime_gone_after_submit_fails_the_trial_naming_it(
    start_master: Callable[..., MasterProcess], container_images: dict[str, str], tmp_path: Path
) -> None:
    # A runtime that is there when the experiment is checked and gone when its trial starts.
    runtime = tmp_path / "bin" / "podman"
    runtime.parent.mkdir()
    runtime.write_text('#!/bin/sh\nexec podman "$@"\n')
    runtime.chmod(0o755)
    master = start_master(env={"MASTER_LITE_CONTAINER_RUNTIME": str(runtime)})
    body = {"config": config(container_images["a"]), "activate": False}
    exp_id = master.create_experiment(context=context_tarball({"x.py": ""}), **body)
    runtime.unlink()
    master.session.post(f"/experiments/{exp_id}/activate")
    assert wait_for_experiment(master, exp_id)["state"] == "ERROR"
    (trial,) = master.trials(exp_id)
    assert (
        f"could not start a container of {container_images['a']}: the container runtime "
        f"'{runtime}' is not installed" in "\n".join(master.logs(trial["id"]))
    )
