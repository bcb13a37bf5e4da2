"""The process runner's trial sandbox (`_sandbox`): a run as the master's user, fresh or in a
pre-started interpreter, cannot read `LaunchSpec.hidden`, sees no process outside itself, still
reads its work dir, and ends as it would unsandboxed (exit status, SIGTERM, SIGKILL)."""

import json
import os
import signal
import subprocess

import pytest

from master_lite.runners import LaunchSpec, LocalRunner, entrypoint_argv
from master_lite.runners.process import process_group_alive
from master_lite.runners.process._sandbox import sandbox_argv
from tests._support import wait_until
from tests.master_lite.runners.process.test_prestart import (
    Collector,
    trial_env,
    wait_for_spares,
    work_dir,
)


def _problem() -> str | None:
    result = subprocess.run(
        [*sandbox_argv(())[:-1], "--probe"], capture_output=True, text=True, timeout=60
    )
    return None if result.returncode == 0 else result.stderr.strip() or "probe failed"


pytestmark = pytest.mark.skipif(
    bool(_problem()), reason="this platform cannot sandbox trials (no user namespaces)"
)

SNOOP = r"""
import json, os, sys
def attempt(read):
    try:
        return read()
    except Exception as exc:
        return type(exc).__name__
private, db = sys.argv[1], sys.argv[2]
print("SNOOP " + json.dumps({
    "token": attempt(lambda: open(os.path.join(private, "token")).read()),
    "db": attempt(lambda: open(db).read()),
    "own": open("train.py").read()[:6],
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
}), flush=True)
sys.exit(int(sys.argv[3]))
"""


@pytest.fixture
def secrets(tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    (private / "token").write_text("the-user-token")
    db = tmp_path / "master.db"
    db.write_text("the store")
    return private, db


@pytest.fixture
def runner():
    collector = Collector()
    runner = LocalRunner(log_sink=collector.sink, on_exit=collector.on_exit, prestarted=1)
    runner.collector = collector
    yield runner
    runner.close()


def _launch(runner, tmp_path, allocation_id, script, entrypoint, hidden):
    spec = LaunchSpec(
        allocation_id=allocation_id,
        trial_id=1,
        argv=entrypoint_argv(entrypoint),
        env=trial_env(tmp_path, allocation_id),
        work_dir=work_dir(tmp_path, allocation_id, script),
        hidden=hidden,
    )
    return runner.launch(spec)


def _finished(runner, allocation_id):
    wait_until(lambda: allocation_id in runner.collector.exits, 60, f"{allocation_id}", 0.02)
    return runner.collector.exits[allocation_id]


def _reports(runner):
    return [
        json.loads(line[len("SNOOP ") :])
        for line in runner.collector.lines("stdout")
        if line.startswith("SNOOP ")
    ]


def test_fresh_and_prestarted_runs_cannot_read_what_is_hidden(runner, tmp_path, secrets):
    private, db = secrets
    entrypoint = f"python3 train.py {private} {db} 3"
    _launch(runner, tmp_path, "trial-1.1", SNOOP, entrypoint, (private, db))
    assert _finished(runner, "trial-1.1") == 3  # its own exit status, through the trampoline
    # Spares start when a launch follows another soon after; they start sandboxed too.
    _launch(runner, tmp_path, "trial-98.1", "pass\n", "python3 train.py", (private, db))
    _finished(runner, "trial-98.1")
    (spare,) = wait_for_spares(runner)
    assert spare.process.args[:4] == sandbox_argv(())[:4]
    pid = _launch(runner, tmp_path, "trial-2.1", SNOOP, entrypoint, (private, db))
    assert pid == spare.process.pid  # the second one ran in a (sandboxed) spare
    assert _finished(runner, "trial-2.1") == 3
    fresh, prestarted = _reports(runner)
    for report in (fresh, prestarted):
        assert report["token"] == "FileNotFoundError"
        assert report["db"] in ("PermissionError", "OSError")
        assert report["own"] == "\nimpor"  # its own work dir is there
        # Its own PID namespace: the init, the trial (and its shell); nothing of the master's.
        assert max(report["pids"]) < 10
    # Outside, nothing changed.
    assert (private / "token").read_text() == "the-user-token"


def test_an_unhidden_run_is_not_sandboxed(runner, tmp_path, secrets):
    private, db = secrets
    _launch(runner, tmp_path, "trial-1.1", SNOOP, f"python3 train.py {private} {db} 0", ())
    assert _finished(runner, "trial-1.1") == 0
    (report,) = _reports(runner)
    assert report["token"] == "the-user-token"


@pytest.mark.parametrize("how", ["terminate", "kill"])
def test_terminate_and_kill_reach_the_sandboxed_trial(runner, tmp_path, secrets, how):
    private, db = secrets
    script = "import time\nprint('READY', flush=True)\ntime.sleep(600)\n"
    _launch(runner, tmp_path, "trial-1.1", script, "python3 train.py", (private, db))
    wait_until(lambda: "READY" in runner.collector.lines("stdout"), 60, "the trial", 0.02)
    if how == "terminate":
        assert runner.terminate("trial-1.1", grace=60)
        assert _finished(runner, "trial-1.1") == 128 + signal.SIGTERM
    else:
        assert runner.kill("trial-1.1")
        assert _finished(runner, "trial-1.1") == 128 + signal.SIGKILL


def test_a_trampoline_killed_alone_takes_its_sandbox_with_it(tmp_path):
    """SIGKILL to the trampoline's pid only (not its group, as a kernel manager or a person
    might): nothing of the trial is left running."""
    process = subprocess.Popen(
        [*sandbox_argv([tmp_path / "private"]), "sh", "-c", "echo READY; sleep 300"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout.readline() == b"READY\n"
        process.kill()
        process.wait()
        wait_until(
            lambda: not process_group_alive(process.pid), 30, "the sandbox's processes to end"
        )
    finally:
        process.stdout.close()
        if process_group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)


def test_a_trial_killed_alone_by_sigkill_ends_its_trampoline_the_same_way(tmp_path):
    """The trial's own process SIGKILLed (the OOM killer, a person, a kernel trial's kernel):
    the trampoline dies of SIGKILL too (before: it failed setting a handler for it, exit 1)."""
    argv = [*sandbox_argv([tmp_path / "private"]), "sh", "-c", "kill -9 $$"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert result.stderr == ""
