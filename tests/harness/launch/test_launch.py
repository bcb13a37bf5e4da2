"""Launchers: wrap_rank and torch_distributed, run as real subprocesses."""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from determined.launch import torch_distributed
from determined.launch.wrap_rank import MAX_LINE_BYTES
from tests._support import wait_until

HARNESS = str(pathlib.Path(__file__).resolve().parents[3] / "harness")


def launch_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = HARNESS + os.pathsep + env.get("PYTHONPATH", "")
    # The workers' "python3" must be the interpreter that has torch.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for name in ("RANK", "DET_SLOT_IDS", "DET_CONTAINER_ADDRS", "DET_CONTAINER_RANK"):
        env.pop(name, None)
    env.update(extra or {})
    return env


def wrap_rank(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.launch.wrap_rank", *args],
        capture_output=True,
        env=kwargs.pop("env", launch_env()),
        timeout=60,
        **kwargs,
    )


def python_cmd(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


# -- wrap_rank ---------------------------------------------------------------------------------


def test_wrap_rank_prefixes_every_line_of_both_streams() -> None:
    code = r"""
        import sys
        sys.stdout.write("one\ntwo\rthree\r\nfour")
        sys.stdout.flush()
        sys.stderr.write("oops\n")
    """
    result = wrap_rank(["3", "--", *python_cmd(code)])
    assert result.returncode == 0
    assert result.stdout == (b"[rank=3] one\n[rank=3] two\r[rank=3] three\r\n[rank=3] four\n")
    assert result.stderr == b"[rank=3] oops\n"


def test_wrap_rank_splits_overlong_lines() -> None:
    code = f"print('a' * {MAX_LINE_BYTES * 2 + 10})"
    result = wrap_rank(["0", *python_cmd(code)])  # "--" is optional
    lines = result.stdout.split(b"\n")[:-1]
    assert [len(line) for line in lines] == [
        len(b"[rank=0] ") + MAX_LINE_BYTES,
        len(b"[rank=0] ") + MAX_LINE_BYTES,
        len(b"[rank=0] ") + 10,
    ]
    assert all(line.startswith(b"[rank=0] ") for line in lines)
    assert b"".join(line[len(b"[rank=0] ") :] for line in lines) == b"a" * (MAX_LINE_BYTES * 2 + 10)


def test_wrap_rank_keeps_the_exit_code() -> None:
    result = wrap_rank(["1", "--", *python_cmd("import sys; print('bye'); sys.exit(7)")])
    assert result.returncode == 7
    assert result.stdout == b"[rank=1] bye\n"


def test_wrap_rank_reads_the_first_set_variable() -> None:
    env = launch_env({"SECOND": "5", "THIRD": "6"})
    env.pop("FIRST", None)
    result = wrap_rank(["FIRST,SECOND,THIRD", "--", *python_cmd("print('hi')")], env=env)
    assert result.returncode == 0
    assert result.stdout == b"[rank=5] hi\n"


def test_wrap_rank_without_a_rank_fails_with_a_message() -> None:
    env = launch_env()
    env.pop("NOT_SET_A", None)
    env.pop("NOT_SET_B", None)
    result = wrap_rank(["NOT_SET_A,NOT_SET_B", "--", *python_cmd("print('ran')")], env=env)
    assert result.returncode == 1
    assert b"NOT_SET_A,NOT_SET_B" in result.stderr
    assert b"ran" not in result.stdout


def test_wrap_rank_forwards_sigterm() -> None:
    code = r"""
        import signal, sys, time
        def on_term(signum, frame):
            print("got SIGTERM", flush=True)
            sys.exit(5)
        signal.signal(signal.SIGTERM, on_term)
        print("ready", flush=True)
        time.sleep(60)
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "determined.launch.wrap_rank", "2", "--", *python_cmd(code)],
        stdout=subprocess.PIPE,
        env=launch_env(),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"[rank=2] ready\n"
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=30)
    assert rest == b"[rank=2] got SIGTERM\n"
    assert proc.returncode == 5


# -- torch_distributed -------------------------------------------------------------------------

ALL_REDUCE_SCRIPT = """
import sys
import torch
torch.set_num_threads(1)
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item():g}", flush=True)
import os
print(f"env {os.environ['USE_TORCH_DISTRIBUTED']} {os.environ['DET_CHIEF_IP']}", flush=True)
from determined.core._distributed import DistributedContext
ctx = DistributedContext.from_torch_distributed()
print(f"allgather {ctx.allgather(ctx.rank * 10)} local {ctx.local_rank}/{ctx.local_size}", flush=True)
ctx.close()
if len(sys.argv) > 1 and int(sys.argv[1]) == dist.get_rank():
    sys.exit(3)  # this rank crashes; the other one is about to block in a barrier forever
dist.barrier()
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_launcher(tmp_path: pathlib.Path, script_args: list[str]) -> subprocess.CompletedProcess:
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE_SCRIPT)
    env = launch_env(
        {
            "DET_SLOT_IDS": "[0,1]",
            "DET_CONTAINER_ADDRS": '["127.0.0.1"]',
            "DET_CONTAINER_RANK": "0",
            "C10D_PORT": str(free_port()),
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "determined.launch.torch_distributed",
         "python3", str(script), *script_args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_torch_distributed_runs_one_prefixed_worker_per_slot(tmp_path: pathlib.Path) -> None:
    result = run_launcher(tmp_path, [])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "[rank=0] rank 0 of 2 sum 3" in lines
    assert "[rank=1] rank 1 of 2 sum 3" in lines
    assert "[rank=0] env True 127.0.0.1" in lines
    assert "[rank=1] env True 127.0.0.1" in lines
    # The workers' DistributedContext comes straight from torchrun's environment.
    assert "[rank=0] allgather [0, 10] local 0/2" in lines
    assert "[rank=1] allgather [0, 10] local 1/2" in lines


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_torch_distributed_crashed_rank_brings_the_job_down(tmp_path: pathlib.Path) -> None:
    # Rank 1 exits 3 while rank 0 waits in a barrier that can never complete: the launcher must
    # stop rank 0 and exit non-zero instead of hanging (subprocess.run's timeout would fail us).
    result = run_launcher(tmp_path, ["1"])
    assert result.returncode != 0
    assert "[rank=1] rank 1 of 2 sum 3" in result.stdout


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie is dead, just unreaped
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_torch_distributed_kills_leftover_worker_processes(tmp_path: pathlib.Path) -> None:
    # Each worker leaves a background process behind and exits 0. torchrun puts workers in
    # sessions of their own, so only the launcher's cleanup can reach those processes.
    pid_file = tmp_path / "pids"
    script = f"sleep 300 >/dev/null 2>&1 & echo $! >> {pid_file}"
    env = launch_env(
        {
            "DET_SLOT_IDS": "[0,1]",
            "DET_CONTAINER_ADDRS": '["127.0.0.1"]',
            "DET_CONTAINER_RANK": "0",
            "C10D_PORT": str(free_port()),
        }
    )
    result = subprocess.run(
        [sys.executable, "-m", "determined.launch.torch_distributed", "sh", "-c", script],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2
    wait_until(lambda: not any(_alive(p) for p in pids), 10, "the workers to exit", 0.1)
    assert not any(_alive(p) for p in pids)


def test_torch_distributed_outside_a_trial_explains(tmp_path: pathlib.Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "determined.launch.torch_distributed", "python3", "x.py"],
        capture_output=True, text=True, env=launch_env(), timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "DET_SLOT_IDS" in result.stderr and "inside a Determined trial" in result.stderr


def test_torchrun_command_single_node() -> None:
    layout = torch_distributed.NodeLayout(
        container_addrs=["10.0.0.5"], container_rank=0, slot_ids=[0, 1, 2]
    )
    cmd = torch_distributed.torchrun_command(
        layout, ["--log_dir", "/tmp/x"], ["python3", "train.py", "--lr", "1"],
        python="py", master_port=1234,
    )  # fmt: skip
    assert cmd == [
        "py", "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "3",
        "--node_rank", "0", "--max_restarts", "0", "--master_addr", "localhost",
        "--master_port", "1234", "--log_dir", "/tmp/x",
        "--module", "determined.launch.wrap_rank", "RANK", "--", "python3", "train.py", "--lr", "1",
    ]  # fmt: skip


def test_torchrun_command_multi_node_uses_chief_ip_and_c10d_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("C10D_PORT", "29999")
    layout = torch_distributed.NodeLayout(
        container_addrs=["10.0.0.5", "10.0.0.6"], container_rank=1, slot_ids=[0, 1]
    )
    cmd = torch_distributed.torchrun_command(layout, [], ["python3", "train.py"])
    assert cmd[cmd.index("--nnodes") + 1] == "2"
    assert cmd[cmd.index("--node_rank") + 1] == "1"
    assert cmd[cmd.index("--master_addr") + 1] == "10.0.0.5"
    assert cmd[cmd.index("--master_port") + 1] == "29999"


def test_single_node_ports_avoid_a_busy_c10d_port() -> None:
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", torch_distributed.DEFAULT_C10D_PORT))
    except OSError:
        holder.close()
        pytest.skip("the default port is in use by someone else")
    try:
        chosen = torch_distributed.single_node_ports({})
    finally:
        holder.close()
    ports = [int(chosen[k]) for k in ("C10D_PORT", "INTER_TRAIN_PROCESS_COMM_PORT_1",
                                      "INTER_TRAIN_PROCESS_COMM_PORT_2")]  # fmt: skip
    assert ports[0] != torch_distributed.DEFAULT_C10D_PORT
    assert len(set(ports)) == 3


def test_single_node_ports_keep_explicit_settings() -> None:
    env = {"C10D_PORT": "1111", "INTER_TRAIN_PROCESS_COMM_PORT_1": "2222"}
    assert torch_distributed.single_node_ports(env) == {}


def test_parse_args_overrides_and_script() -> None:
    assert torch_distributed.parse_args(["--nproc_per_node", "1", "--", "python3", "t.py"]) == (
        ["--nproc_per_node", "1"],
        ["python3", "t.py"],
    )
    assert torch_distributed.parse_args(["python3", "t.py"]) == ([], ["python3", "t.py"])
    with pytest.raises(torch_distributed.LaunchError, match="no script"):
        torch_distributed.parse_args(["--nproc_per_node", "1", "--"])
    assert torch_distributed.parse_args(["--trial", "model_def:MyTrial"]) == (
        [],
        ["python3", "-m", "determined.exec.harness", "model_def:MyTrial"],
    )


# -- exec.launch -------------------------------------------------------------------------------

from determined.exec import launch as exec_launch  # noqa: E402


def test_entrypoint_command_forms() -> None:
    assert exec_launch.entrypoint_command("python3 train.py --x 1") == [
        "sh", "-c", "python3 train.py --x 1",
    ]  # fmt: skip
    assert exec_launch.entrypoint_command(["python3", "train.py"]) == ["python3", "train.py"]
    assert exec_launch.entrypoint_command("model_def:MyTrial", python="py") == [
        "py", "-m", "determined.exec.harness", "model_def:MyTrial",
    ]  # fmt: skip
    assert exec_launch.entrypoint_command("model_def:MyTrial", num_slots=2, python="py") == [
        "py", "-m", "determined.launch.torch_distributed", "--trial", "model_def:MyTrial",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="empty list"):
        exec_launch.entrypoint_command([])


def test_exec_launch_runs_the_config_entrypoint_and_keeps_its_exit_code() -> None:
    env = launch_env({"DET_EXPERIMENT_CONFIG": '{"entrypoint": "echo from-config; exit 4"}'})
    result = subprocess.run(
        [sys.executable, "-m", "determined.exec.launch"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.stdout == "from-config\n"
    assert result.returncode == 4


def test_exec_launch_without_entrypoint_explains() -> None:
    env = launch_env()
    env.pop("DET_EXPERIMENT_CONFIG", None)
    result = subprocess.run(
        [sys.executable, "-m", "determined.exec.launch"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "DET_EXPERIMENT_CONFIG" in result.stderr


def test_exec_launch_forwards_sigterm_once() -> None:
    code = r"""
        import signal, sys, time
        count = 0
        def on_term(signum, frame):
            global count
            count += 1
        signal.signal(signal.SIGTERM, on_term)
        print("ready", flush=True)
        while count == 0:
            time.sleep(0.05)
        time.sleep(1.5)  # let a duplicate arrive, if there is one
        print(f"terms {count}", flush=True)
        sys.exit(9)
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "determined.exec.launch", *python_cmd(code)],
        stdout=subprocess.PIPE, env=launch_env(), start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    proc.send_signal(signal.SIGTERM)  # to the launcher only
    rest, _ = proc.communicate(timeout=30)
    assert rest == b"terms 1\n"
    assert proc.returncode == 9
