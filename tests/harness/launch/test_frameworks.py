"""The tensorflow, horovod and deepspeed launchers: argument parsing, TF_CONFIG, and real runs
of the launchers as subprocesses (without TensorFlow in the workers, and without Horovod or
DeepSpeed installed)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from determined.core import _launch_env
from determined.launch import _common, deepspeed, horovod, tensorflow

HARNESS = str(pathlib.Path(__file__).resolve().parents[3] / "harness")


def layout(addrs: list[str], rank: int, slots: list[int], counts=None) -> _common.NodeLayout:
    return _common.NodeLayout(
        container_addrs=addrs, container_rank=rank, slot_ids=slots, container_slot_counts=counts
    )


# -- tensorflow: arguments ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--", "python3", "train.py"], (None, ["python3", "train.py"])),
        (["python3", "train.py", "--lr", "1"], (None, ["python3", "train.py", "--lr", "1"])),
        (["--port", "1234", "--", "python3", "t.py"], (1234, ["python3", "t.py"])),
        (["--port", "1234", "python3", "t.py"], (1234, ["python3", "t.py"])),
        # After "--" everything is the script's, even a --port.
        (["--", "python3", "t.py", "--port", "9"], (None, ["python3", "t.py", "--port", "9"])),
        (["python3", "t.py", "--", "x"], (None, ["python3", "t.py", "x"])),
    ],
)
def test_tensorflow_parse_args(argv: list[str], expected: tuple) -> None:
    assert tensorflow.parse_args(argv) == expected


def test_tensorflow_parse_args_needs_a_script() -> None:
    with pytest.raises(_common.LaunchError, match="empty script"):
        tensorflow.parse_args(["--port", "1", "--"])
    with pytest.raises(_common.LaunchError, match="empty script"):
        tensorflow.parse_args([])


# -- tensorflow: TF_CONFIG ---------------------------------------------------------------------


def test_single_node_workers_get_distinct_free_ports() -> None:
    workers = tensorflow.worker_addresses(layout(["127.0.0.1"], 0, [0, 1, 2]), None, {})
    hosts = {w.rsplit(":", 1)[0] for w in workers}
    ports = {int(w.rsplit(":", 1)[1]) for w in workers}
    assert hosts == {"127.0.0.1"} and len(ports) == 3


def test_explicit_port_counts_up_per_local_worker() -> None:
    workers = tensorflow.worker_addresses(layout(["10.0.0.1"], 0, [0, 1]), 5000, {})
    assert workers == ["10.0.0.1:5000", "10.0.0.1:5001"]


def test_multi_node_workers_use_c10d_port_and_slot_counts() -> None:
    here = layout(["10.0.0.1", "10.0.0.2"], 1, [0], counts=[2, 1])
    workers = tensorflow.worker_addresses(here, None, {"C10D_PORT": "29555"})
    assert workers == ["10.0.0.1:29555", "10.0.0.1:29556", "10.0.0.2:29555"]
    (env,) = tensorflow.worker_environments(here, workers, {"CUDA_VISIBLE_DEVICES": "3"})
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {"worker": workers},
        "task": {"type": "worker", "index": 2},
    }
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == (
        "2", "3", "0", "1",
    )  # fmt: skip
    assert (env["GROUP_RANK"], env["GROUP_WORLD_SIZE"]) == ("1", "2")
    assert env["CUDA_VISIBLE_DEVICES"] == "3"


def test_worker_environments_one_gpu_each() -> None:
    here = layout(["127.0.0.1"], 0, [0, 1])
    workers = ["127.0.0.1:1", "127.0.0.1:2"]
    envs = tensorflow.worker_environments(
        here, workers, {"CUDA_VISIBLE_DEVICES": "4,6", "KEEP": "me"}
    )
    assert [json.loads(e["TF_CONFIG"])["task"]["index"] for e in envs] == [0, 1]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["4", "6"]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1"]
    assert all(e["KEEP"] == "me" and e["WORLD_SIZE"] == "2" for e in envs)
    # CPU slots: no GPUs to hand out, the variable stays as it was.
    envs = tensorflow.worker_environments(here, workers, {"CUDA_VISIBLE_DEVICES": ""})
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["", ""]


def test_from_tf_config_local_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "GROUP_WORLD_SIZE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    # Determined's layout: one worker per node.
    assert _launch_env.tf_local_layout(1, 3) == (0, 1, 1, 3)
    launcher_env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                    "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1"}  # fmt: skip
    for name, value in launcher_env.items():
        monkeypatch.setenv(name, value)
    assert _launch_env.tf_local_layout(1, 2) == (1, 2, 0, 1)
    # Variables that disagree with TF_CONFIG (left from another launcher) are ignored.
    assert _launch_env.tf_local_layout(0, 2) == (0, 1, 0, 2)


# -- running the launchers ---------------------------------------------------------------------


def trial_env(slots: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = HARNESS + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for name in ("RANK", "WORLD_SIZE", "TF_CONFIG", "HOROVOD_RANK", "USE_DEEPSPEED"):
        env.pop(name, None)
    env.update(
        {
            "DET_SLOT_IDS": json.dumps(list(range(slots))),
            "DET_CONTAINER_ADDRS": json.dumps(["127.0.0.1"]),
            "DET_CONTAINER_RANK": "0",
            "DET_CONTAINER_SLOT_COUNTS": json.dumps([slots]),
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    env.update(extra or {})
    return env


def launch(module: str, args: list[str], env: dict[str, str], timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", f"determined.launch.{module}", *args],
        capture_output=True, text=True, env=env, timeout=timeout,
    )  # fmt: skip


SHOW_ENV = textwrap.dedent(
    """
    import json, os, sys
    keys = ["TF_CONFIG", "RANK", "WORLD_SIZE", "LOCAL_RANK", "DET_CHIEF_IP", "HOROVOD_RANK",
            "USE_DEEPSPEED", "USE_HOROVOD"]
    print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    """
)


def shown(stdout: str) -> list[dict]:
    return [json.loads(line.split("ENV ", 1)[1]) for line in stdout.splitlines() if "ENV {" in line]


def test_tensorflow_one_slot_runs_the_script_as_is() -> None:
    result = launch("tensorflow", ["--", sys.executable, "-c", SHOW_ENV], trial_env(1))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ENV ")  # no [rank=N] prefix
    (env,) = shown(result.stdout)
    assert env["TF_CONFIG"] is None and env["DET_CHIEF_IP"] == "127.0.0.1"


def test_tensorflow_two_slots_start_two_workers() -> None:
    result = launch("tensorflow", [sys.executable, "-c", SHOW_ENV], trial_env(2))
    assert result.returncode == 0, result.stderr
    lines = sorted(line for line in result.stdout.splitlines() if "ENV" in line)
    assert lines[0].startswith("[rank=0] ENV ") and lines[1].startswith("[rank=1] ENV ")
    envs = sorted(shown(result.stdout), key=lambda e: int(e["RANK"]))
    configs = [json.loads(e["TF_CONFIG"]) for e in envs]
    assert [c["task"] for c in configs] == [
        {"type": "worker", "index": 0},
        {"type": "worker", "index": 1},
    ]
    assert configs[0]["cluster"] == configs[1]["cluster"]
    assert len(set(configs[0]["cluster"]["worker"])) == 2
    assert [e["WORLD_SIZE"] for e in envs] == ["2", "2"]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1"]


def test_tensorflow_first_failure_stops_the_other_workers(tmp_path: pathlib.Path) -> None:
    script = textwrap.dedent(
        """
        import os, pathlib, sys, time
        started = pathlib.Path(sys.argv[1])
        if os.environ["RANK"] == "1":
            while not started.exists():  # fail only once rank 0 is surely running
                time.sleep(0.05)
            sys.exit(5)
        started.with_suffix(".tmp").write_text(str(os.getpid()))
        started.with_suffix(".tmp").rename(started)
        time.sleep(120)
        """
    )
    started = tmp_path / "rank0.pid"
    # launch() gives up after 60 s: a launcher that waited out rank 0's 120 s would fail there.
    result = launch("tensorflow", ["--", sys.executable, "-c", script, str(started)], trial_env(2))
    assert result.returncode == 5, result.stderr
    try:
        state = pathlib.Path(f"/proc/{started.read_text()}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        state = "State:\tgone"
    # Stopped, not left running behind the launcher (a zombie not yet reaped has stopped too).
    assert "State:\tZ" in state or "State:\tgone" in state, state


def test_tensorflow_outside_a_trial_explains() -> None:
    env = trial_env(1)
    del env["DET_SLOT_IDS"]
    result = launch("tensorflow", ["python3", "x.py"], env)
    assert result.returncode == 1
    assert "determined.launch.tensorflow must run inside a Determined trial" in result.stderr


# -- horovod -----------------------------------------------------------------------------------


def test_horovod_parse_args() -> None:
    assert horovod.parse_args(["python3", "t.py"]) == ([], ["python3", "t.py"], False)
    assert horovod.parse_args(["--", "python3", "t.py"]) == ([], ["python3", "t.py"], False)
    assert horovod.parse_args(["--fusion-threshold-mb", "1", "--", "python3", "t.py"]) == (
        ["--fusion-threshold-mb", "1"],
        ["python3", "t.py"],
        False,
    )
    assert horovod.parse_args(["--autohorovod", "--trial", "model_def:T"]) == (
        [],
        ["python3", "-m", "determined.exec.harness", "model_def:T"],
        True,
    )
    with pytest.raises(_common.LaunchError, match="extra arguments to --trial"):
        horovod.parse_args(["--trial", "model_def:T", "python3", "t.py"])
    with pytest.raises(_common.LaunchError, match="empty script"):
        horovod.parse_args(["--np", "2", "--"])


def test_horovodrun_command() -> None:
    config = {
        "optimizations": {"auto_tune_tensor_fusion": False, "tensor_fusion_threshold": 64,
                          "tensor_fusion_cycle_time": 1},
        "data": {"__det_dtrain_args": ["--x"]},
    }  # fmt: skip
    cmd = horovod.horovodrun_command(
        layout(["127.0.0.1"], 0, [0, 1]), config, ["--y"], ["python3", "t.py"]
    )
    assert cmd[:12] == [
        "horovodrun", "-np", "2", "-p", "12350", "-H", "localhost:2", "--start-timeout", "1200",
        "--gloo-timeout-seconds", "240", "--fusion-threshold-mb",
    ]  # fmt: skip
    i = cmd.index("--")
    assert cmd[i - 2 : i] == ["--x", "--y"]
    assert cmd[i + 1 :] == [
        sys.executable, "-m", "determined.launch.wrap_rank",
        "HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK", "--", "python3", "t.py",
    ]  # fmt: skip
    auto = horovod.performance_args({"auto_tune_tensor_fusion": True})
    assert auto[:3] == ["--autotune", "--autotune-log-file", "/tmp/autotune_log.csv"]


needs_no_horovod = pytest.mark.skipif(
    shutil.which("horovodrun") is not None, reason="horovod is installed here"
)
needs_no_deepspeed = pytest.mark.skipif(
    shutil.which("deepspeed") is not None, reason="deepspeed is installed here"
)


@needs_no_horovod
def test_horovod_one_slot_without_horovod_runs_the_script() -> None:
    result = launch("horovod", ["--", sys.executable, "-c", SHOW_ENV, "4"], trial_env(1))
    assert result.returncode == 4, result.stderr
    (env,) = shown(result.stdout)
    assert (env["RANK"], env["WORLD_SIZE"], env["HOROVOD_RANK"]) == ("0", "1", "0")
    assert env["USE_HOROVOD"] is None  # nothing initialised Horovod


@needs_no_horovod
def test_horovod_two_slots_without_horovod_fails_at_once() -> None:
    result = launch("horovod", ["--", sys.executable, "-c", SHOW_ENV], trial_env(2))
    assert result.returncode == 1
    assert "pip install horovod" in result.stderr
    assert "determined.launch.torch_distributed" in result.stderr
    assert "ENV" not in result.stdout


# -- deepspeed ---------------------------------------------------------------------------------


def test_deepspeed_parse_args() -> None:
    assert deepspeed.parse_args(["python3", "t.py"]) == ["python3", "t.py"]
    assert deepspeed.parse_args(["--", "python3", "t.py", "--x"]) == ["python3", "t.py", "--x"]
    with pytest.warns(FutureWarning):
        assert deepspeed.parse_args(["--trial", "m:T"]) == [
            "python3", "-m", "determined.exec.harness", "m:T",
        ]  # fmt: skip
    with pytest.raises(_common.LaunchError, match="empty script"):
        deepspeed.parse_args([])


def test_deepspeed_command() -> None:
    cmd = deepspeed.deepspeed_command(["python3", "t.py"], version="0.14.0")
    assert cmd == [
        "deepspeed", "--master_addr", "localhost", "--no_python", "--no_local_rank",
        "--no_ssh_check", "--", sys.executable, "-m", "determined.launch.wrap_rank", "RANK",
        "--", "python3", "t.py",
    ]  # fmt: skip
    assert "--no_ssh_check" not in deepspeed.deepspeed_command(["x"], version="0.6.3")


@needs_no_deepspeed
def test_deepspeed_one_slot_without_deepspeed_runs_the_script() -> None:
    result = launch("deepspeed", [sys.executable, "-c", SHOW_ENV], trial_env(1))
    assert result.returncode == 0, result.stderr
    (env,) = shown(result.stdout)
    assert (env["RANK"], env["WORLD_SIZE"], env["USE_DEEPSPEED"]) == ("0", "1", "1")


@needs_no_deepspeed
def test_deepspeed_two_slots_without_deepspeed_fails_at_once() -> None:
    result = launch("deepspeed", [sys.executable, "-c", SHOW_ENV], trial_env(2))
    assert result.returncode == 1
    assert "pip install deepspeed" in result.stderr
    assert "determined.launch.torch_distributed" in result.stderr
