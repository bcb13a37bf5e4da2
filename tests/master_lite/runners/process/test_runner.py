import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from master_lite.runners import (
    MAX_LINE_BYTES,
    LaunchSpec,
    LocalRunner,
    RunAs,
    entrypoint_argv,
    split_line,
)
from tests._support import wait_until


def test_entrypoint_forms():
    assert entrypoint_argv("python3 train.py --x 1") == ["sh", "-c", "python3 train.py --x 1"]
    assert entrypoint_argv(["python3", "train.py"]) == ["python3", "train.py"]
    assert entrypoint_argv("model_def:MyTrial", python="/py") == [
        "/py",
        "-m",
        "determined.exec.harness",
        "model_def:MyTrial",
    ]
    # A notebook entrypoint runs through papermill; a notebook among other words stays a command.
    assert entrypoint_argv("train.ipynb", python="/py") == [
        "/py",
        "-m",
        "determined.exec.notebook",
        "train.ipynb",
    ]
    assert entrypoint_argv("jupyter nbconvert train.ipynb") == [
        "sh",
        "-c",
        "jupyter nbconvert train.ipynb",
    ]


def test_rank_prefix_is_stripped_and_long_lines_split():
    assert split_line(b"[rank=3] hello") == [(3, "hello")]
    assert split_line(b"plain [rank=3] text") == [(None, "plain [rank=3] text")]
    pieces = split_line(b"x" * (2 * MAX_LINE_BYTES + 5))
    assert [len(text) for _, text in pieces] == [MAX_LINE_BYTES, MAX_LINE_BYTES, 5]


class Collector:
    def __init__(self):
        self.records = []
        self.exits = {}
        self.done = threading.Event()

    def sink(self, records):
        self.records.extend(records)

    def on_exit(self, allocation_id, code):
        self.exits[allocation_id] = code
        self.done.set()


def launch(tmp_path, script, allocation_id="trial-1.1"):
    collector = Collector()
    runner = LocalRunner(log_sink=collector.sink, on_exit=collector.on_exit)
    pid = runner.launch(
        LaunchSpec(
            allocation_id=allocation_id,
            trial_id=1,
            argv=[sys.executable, "-c", script],
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            work_dir=tmp_path,
        )
    )
    return runner, collector, pid


def test_captures_streams_ranks_and_carriage_returns(tmp_path):
    script = (
        "import sys\n"
        "print('out line')\n"
        "sys.stderr.write('err line\\n')\n"
        "sys.stdout.write('10%\\r20%\\r\\n')\n"
        "print('[rank=2] from rank two')\n"
        "sys.stdout.write('no newline at end')\n"
        "sys.exit(3)\n"
    )
    runner, collector, _ = launch(tmp_path, script)
    assert collector.done.wait(20)
    assert collector.exits == {"trial-1.1": 3}
    by_stream = {}
    for trial_id, rank, stream, _, line in collector.records:
        assert trial_id == 1
        by_stream.setdefault(stream, []).append((rank, line))
    assert by_stream["stderr"] == [(None, "err line")]
    assert by_stream["stdout"] == [
        (None, "out line"),
        (None, "10%"),
        (None, "20%"),
        (2, "from rank two"),
        (None, "no newline at end"),
    ]


def test_runs_in_its_own_process_group_and_kill_takes_the_group(tmp_path):
    marker = tmp_path / "child.pid"
    script = (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "print('pgid', os.getpgid(0), 'pid', os.getpid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    runner, collector, pid = launch(tmp_path, script)
    wait_until(lambda: marker.exists() and marker.read_text(), 20, "the child's pid", 0.05)
    child_pid = int(marker.read_text())
    assert os.getpgid(pid) == pid and os.getpgid(child_pid) == pid
    assert runner.kill("trial-1.1")
    assert collector.done.wait(20)
    assert collector.exits["trial-1.1"] == 128 + signal.SIGKILL

    def gone() -> bool:  # the grandchild dies with the group
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 10, "the child process to die with the group", 0.05)


def test_terminate_sends_sigterm_then_sigkill(tmp_path):
    script = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    runner, collector, _ = launch(tmp_path, script)
    wait_until(lambda: any(r[4] == "ready" for r in collector.records), 20, "ready", 0.05)
    runner.terminate("trial-1.1", grace=0.5)
    assert collector.done.wait(20)
    assert collector.exits["trial-1.1"] == 128 + signal.SIGKILL


def test_orphan_kill_only_takes_groups_running_that_allocation():
    import subprocess

    from master_lite.runners import kill_orphaned_group

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours = subprocess.Popen(
        sleeper, start_new_session=True, env=dict(os.environ, DET_ALLOCATION_ID="trial-7.2")
    )
    stranger = subprocess.Popen(
        sleeper, start_new_session=True, env=dict(os.environ, DET_ALLOCATION_ID="trial-7.20")
    )
    try:
        assert kill_orphaned_group(stranger.pid, "trial-7.2") is False
        assert kill_orphaned_group(ours.pid, "trial-7.2") is True
        assert ours.wait(10) == -signal.SIGKILL
        assert stranger.poll() is None
    finally:
        for process in (ours, stranger):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_the_run_gets_the_masters_environment_under_its_own_and_python3_is_the_masters(
    tmp_path, monkeypatch
):
    """`LaunchSpec.env` is the run's own; the process runner puts the master's under it (less
    the master's token) and runs `python3` as the master's interpreter."""
    monkeypatch.setenv("MASTERS_OWN", "from the master")
    monkeypatch.setenv("SHADOWED", "master")
    monkeypatch.setenv("DET_MASTER_TOKEN", "never given to a trial")
    collector = Collector()
    runner = LocalRunner(log_sink=collector.sink, on_exit=collector.on_exit, prestarted=0)
    script = (
        "import os, sys; print(os.environ['MASTERS_OWN'], os.environ['SHADOWED'], "
        "'DET_MASTER_TOKEN' in os.environ, sys.executable == os.environ['EXPECTED'])"
    )
    runner.launch(
        LaunchSpec(
            "trial-1.1",
            1,
            ["python3", "-c", script],
            {"SHADOWED": "run", "EXPECTED": sys.executable},
            tmp_path,
        )
    )
    assert collector.done.wait(20)
    assert collector.exits == {"trial-1.1": 0}
    lines = [r[4] for r in collector.records if r[2] == "stdout"]
    assert lines == ["from the master run False True"]


RUN_AS_USER = "det-runas-test"


@pytest.fixture
def other_user():
    """A Unix user made for the test (root only: starting a process as another user is)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to make a user to run as")
    try:
        entry = pwd.getpwnam(RUN_AS_USER)
        made = False
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", RUN_AS_USER], check=True)
        entry = pwd.getpwnam(RUN_AS_USER)
        made = True
    yield entry
    if made:
        subprocess.run(["userdel", RUN_AS_USER], check=False)


def test_a_run_starts_as_the_user_it_asks_for(tmp_path, other_user):
    work_dir = Path(tempfile.mkdtemp(prefix="det-runas-"))  # not under root's 0700 tmp dirs
    try:
        work_dir.chmod(0o755)
        collector = Collector()
        runner = LocalRunner(log_sink=collector.sink, on_exit=collector.on_exit)
        # `sh`, not the master's interpreter: that may sit where only root can read (/root).
        script = 'echo "$(id -u) $(id -g) $(pwd)"'
        pid = runner.launch(
            LaunchSpec(
                "trial-1.1",
                1,
                ["sh", "-c", script],
                {},
                work_dir,
                run_as=RunAs(user=RUN_AS_USER),
            )
        )
        assert collector.done.wait(20)
        assert collector.exits == {"trial-1.1": 0}
        lines = [r[4] for r in collector.records if r[2] == "stdout"]
        assert lines == [f"{other_user.pw_uid} {other_user.pw_gid} {work_dir}"]
        assert pid is not None
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def test_run_as_an_unknown_user_fails_to_start(tmp_path):
    runner = LocalRunner(log_sink=lambda records: None, on_exit=lambda aid, code: None)
    spec = LaunchSpec("trial-1.1", 1, ["true"], {}, tmp_path, run_as=RunAs(user="no-such-user-x"))
    with pytest.raises(OSError, match="no Unix user 'no-such-user-x'"):
        runner.launch(spec)
