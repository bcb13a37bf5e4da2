"""The container runtime's pure parts: image choice, generated settings, mounts, GPU devices."""

from __future__ import annotations

import resource
import shutil
import threading
from pathlib import Path

import pytest

from master_lite.runners import (
    ContainerRunner,
    ContainerRuntime,
    LaunchSpec,
    Runner,
    container_image,
    gpu_device_args,
)
from master_lite.runners.container._config import config_mounts, config_options
from master_lite.runners.container._runtime import harness_mounts


def test_the_image_is_chosen_by_slot_type() -> None:
    assert container_image({}, gpu=False) is None
    assert container_image({"environment": {"image": None}}, gpu=True) is None
    assert container_image({"environment": {"image": "img:1"}}, gpu=True) == "img:1"
    both = {"environment": {"image": {"cpu": "c", "cuda": "g"}}}
    assert container_image(both, gpu=False) == "c"
    assert container_image(both, gpu=True) == "g"
    # `gpu` is Determined's older name for `cuda`; a missing kind falls back to the other one.
    assert container_image({"environment": {"image": {"gpu": "old"}}}, gpu=True) == "old"
    assert container_image({"environment": {"image": {"cpu": "c"}}}, gpu=True) == "c"


def test_generated_settings_match_this_hosts_limits(tmp_path: Path) -> None:
    runtime = ContainerRuntime("podman", root_dir=tmp_path)
    args = runtime.host_settings()
    _, nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    if nofile != resource.RLIM_INFINITY:
        assert f"nofile={nofile}:{nofile}" in args
    assert any(arg.startswith("nproc=") for arg in args)
    if shutil.which("runc"):
        assert args[:2] == ["--runtime", shutil.which("runc")]
    # Docker has no --runtime runc default to override.
    assert "--runtime" not in ContainerRuntime("docker", root_dir=tmp_path).host_settings()


def test_container_names_are_tied_to_the_trial_and_unique_per_master(tmp_path: Path) -> None:
    one = ContainerRuntime("podman", root_dir=tmp_path / "one")
    two = ContainerRuntime("podman", root_dir=tmp_path / "two")
    assert one.container_name("trial-7.2").endswith("-trial-7.2")
    assert one.container_name("trial-7.2") != two.container_name("trial-7.2")


def test_run_command_passes_values_by_name_only(tmp_path: Path) -> None:
    runtime = ContainerRuntime("podman", root_dir=tmp_path)
    command = runtime.run_command(
        name="det-x-trial-1.1",
        image="img:1",
        argv=["python3", "train.py"],
        env_names=["DET_SESSION_TOKEN"],
        work_dir="/w",
        mounts=harness_mounts(),
        device_args=[],
    )
    assert command[-3:] == ["img:1", "python3", "train.py"]
    assert ["--env", "DET_SESSION_TOKEN"] == command[command.index("--env") :][:2]
    assert ["--network", "host"] == command[command.index("--network") :][:2]
    assert any(arg.endswith(":/opt/determined-harness/determined:ro") for arg in command)
    assert any(arg.endswith(":/opt/determined-harness-deps/requests:ro") for arg in command)


def test_mounts_come_from_bind_mounts_not_the_whole_shared_fs_storage() -> None:
    config = {
        "bind_mounts": [{"host_path": "/data", "container_path": "/in", "read_only": True}],
        "checkpoint_storage": {"type": "shared_fs", "host_path": "/ckpt", "storage_path": "."},
    }
    mounts = {where: mount.argument() for where, mount in config_mounts(config)}
    # The storage is not mounted whole: each trial gets its own view (_storage.py).
    assert mounts == {"bind_mounts[0].host_path": "/data:/in:ro"}


def test_gpus_go_through_cdi_when_a_spec_names_them(tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n")
    args, visible = gpu_device_args([2, 3], cdi_dirs=[cdi], dev_dir=tmp_path / "dev")
    assert args == ["--device", "nvidia.com/gpu=2", "--device", "nvidia.com/gpu=3"]
    assert visible == "0,1"  # CDI gives the container only those two, numbered from 0


def test_gpus_without_cdi_pass_the_device_nodes(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    args, visible = gpu_device_args([1], cdi_dirs=[tmp_path / "no-cdi"], dev_dir=dev)
    assert args == [
        "--device",
        str(dev / "nvidia1"),
        "--device",
        str(dev / "nvidiactl"),
        "--device",
        str(dev / "nvidia-uvm"),
    ]
    assert visible == "1"
    assert gpu_device_args([], cdi_dirs=[], dev_dir=dev) == ([], "")


class _NoContainers(Runner):
    def launch(self, spec):  # type: ignore[no-untyped-def]
        return None

    def running(self):  # type: ignore[no-untyped-def]
        return []

    def send_signal(self, allocation_id, sig):  # type: ignore[no-untyped-def]
        return False

    def terminate(self, allocation_id, grace):  # type: ignore[no-untyped-def]
        return False

    def kill(self, allocation_id):  # type: ignore[no-untyped-def]
        return False


@pytest.mark.parametrize("image", ["img:1", {"cpu": "img:1"}])
def test_runners_without_containers_refuse_images(image: object) -> None:
    """What Ray's runner (and a deployment's own runner class) answers at submit time."""
    runner = _NoContainers(log_sink=lambda records: None, on_exit=lambda a, c: None)
    (problem,) = runner.config_problems({"environment": {"image": image}})
    assert problem.startswith("environment.image: _NoContainers does not run trials in containers")
    assert runner.config_problems({"environment": {}}) == []


# A stand-in for podman: records each call's argv (and, for `run`, the values of the variables
# it passes by name), prints a line and exits with $FAKE_EXIT.
FAKE_RUNTIME = """#!/bin/sh
log="$(dirname "$0")/calls"
printf '%s\\n' "$*" >> "$log"
if [ "$1" = run ]; then
  echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" >> "$log"
  echo "DET_SESSION_TOKEN=$DET_SESSION_TOKEN" >> "$log"
  echo "hello from the container"
  exit "${FAKE_EXIT:-0}"
fi
"""


def run_once(
    runtime: ContainerRuntime, tmp_path: Path, env: dict[str, str]
) -> tuple[int, list, list[str]]:
    records: list = []
    exits: list[int] = []
    done = threading.Event()

    def on_exit(allocation_id: str, code: int) -> None:
        exits.append(code)
        done.set()

    runner = ContainerRunner(log_sink=records.extend, on_exit=on_exit, runtime=runtime)
    (tmp_path / "w").mkdir(exist_ok=True)
    runner.launch(
        LaunchSpec(
            allocation_id="trial-3.1",
            trial_id=3,
            argv=["python3", "train.py"],
            env={"DET_SESSION_TOKEN": "secret", **env},
            work_dir=tmp_path / "w",
            image="img:1",
            config={},
        )
    )
    assert done.wait(60), "the fake runtime's run never ended"
    calls = (tmp_path / "rt" / "calls").read_text().splitlines()
    return exits[0], records, calls


@pytest.fixture
def fake_runtime(tmp_path: Path) -> Path:
    directory = tmp_path / "rt"
    directory.mkdir()
    binary = directory / "podman"
    binary.write_text(FAKE_RUNTIME)
    binary.chmod(0o755)
    return binary


def test_container_runner_gives_the_trial_its_gpus_through_cdi(
    fake_runtime: Path, tmp_path: Path
) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "nvidia.yaml").write_text("kind: nvidia.com/gpu\n")
    runtime = ContainerRuntime(str(fake_runtime), root_dir=tmp_path, cdi_dirs=[cdi])
    code, records, calls = run_once(runtime, tmp_path, {"CUDA_VISIBLE_DEVICES": "2"})
    assert code == 0
    run = next(call for call in calls if call.startswith("run "))
    assert "--device nvidia.com/gpu=2" in run
    assert "secret" not in run  # values travel in the environment, never in argv
    assert "CUDA_VISIBLE_DEVICES=0" in calls and "DET_SESSION_TOKEN=secret" in calls
    assert [r[4] for r in records] == ["hello from the container"]
    # Removed after the run, whatever ended it.
    assert calls[-1] == f"rm --force {runtime.container_name('trial-3.1')}"


def test_container_runner_without_cdi_passes_device_nodes_and_host_numbers(
    fake_runtime: Path, tmp_path: Path
) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia2").touch()
    runtime = ContainerRuntime(
        str(fake_runtime), root_dir=tmp_path, cdi_dirs=[tmp_path / "none"], dev_dir=dev
    )
    _, _, calls = run_once(runtime, tmp_path, {"CUDA_VISIBLE_DEVICES": "2"})
    run = next(call for call in calls if call.startswith("run "))
    assert f"--device {dev / 'nvidia2'}" in run and "nvidia.com/gpu" not in run
    assert "CUDA_VISIBLE_DEVICES=2" in calls


def test_a_runtime_failure_is_named_in_the_trial_log(
    fake_runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EXIT", "125")
    runtime = ContainerRuntime(str(fake_runtime), root_dir=tmp_path)
    code, records, _ = run_once(runtime, tmp_path, {})
    assert code == 125
    assert records[-1][2] == "master"
    assert records[-1][4].startswith("the container runtime could not start the container")


# A runtime whose container exists only after a first `kill` was tried (and failed on it).
SLOW_CREATING_RUNTIME = """#!/bin/sh
dir="$(dirname "$0")"
case "$1" in
  run)
    echo run >> "$dir/calls"
    until grep -qx kill "$dir/calls"; do sleep 0.05; done
    touch "$dir/created"
    while [ ! -f "$dir/killed" ]; do sleep 0.05; done
    exit 137 ;;
  kill)
    # Checked before the call is recorded: the first kill always finds no container.
    if [ -f "$dir/created" ]; then touch "$dir/killed"; echo kill >> "$dir/calls"; exit 0; fi
    echo kill >> "$dir/calls"
    echo "no such container" >&2; exit 125 ;;
  *) echo "$1" >> "$dir/calls" ;;
esac
"""


def test_a_kill_before_the_container_exists_is_repeated_until_it_lands(tmp_path: Path) -> None:
    directory = tmp_path / "rt"
    directory.mkdir()
    binary = directory / "podman"
    binary.write_text(SLOW_CREATING_RUNTIME)
    binary.chmod(0o755)
    exits: list[int] = []
    done = threading.Event()
    runner = ContainerRunner(
        log_sink=lambda records: None,
        on_exit=lambda allocation_id, code: (exits.append(code), done.set()),
        runtime=ContainerRuntime(str(binary), root_dir=tmp_path),
    )
    (tmp_path / "w").mkdir()
    spec = LaunchSpec("trial-1.1", 1, ["true"], {}, tmp_path / "w", image="img:1", config={})
    runner.launch(spec)
    assert runner.kill("trial-1.1")
    assert done.wait(60), "the kill never reached the container"
    assert exits == [137]
    calls = (directory / "calls").read_text().split()
    assert calls.count("kill") >= 2 and calls[-1] == "rm"


def test_devices_shm_and_capabilities_become_run_options() -> None:
    config = {
        "resources": {
            "devices": ["/dev/fuse:/dev/fuse:rwm", {"host_path": "/dev/null", "mode": "r"}],
            "shm_size": 1024,
        },
        "environment": {"add_capabilities": ["SYS_PTRACE"], "drop_capabilities": ["NET_RAW"]},
    }
    assert config_options(config) == [
        "--device",
        "/dev/fuse:/dev/fuse:rwm",
        "--device",
        "/dev/null:/dev/null:r",
        "--shm-size",
        "1024b",
        "--cap-add",
        "SYS_PTRACE",
        "--cap-drop",
        "NET_RAW",
    ]
    # Determined's default /dev/shm (4 GiB), not the runtime's 64 MiB; a string keeps its unit.
    assert config_options({}) == ["--shm-size", f"{4 * 1024**3}b"]
    assert config_options({"resources": {"shm_size": "2G"}}) == ["--shm-size", "2G"]


def test_a_missing_device_is_a_submit_problem(tmp_path: Path) -> None:
    runtime = ContainerRuntime("/bin/true", root_dir=tmp_path)  # every image "exists"
    config = {"environment": {"image": "img"}, "resources": {"devices": ["/dev/no-such:/x"]}}
    assert runtime.config_problems(config) == [
        "resources.devices[0]: device '/dev/no-such' does not exist on this machine"
    ]
