"""Issue 26 row 10: one master per root dir, by an OS lock taken before anything is written.

Two `master-lite` started together on a fresh root dir: exactly one serves, the other exits 1
naming the root dir and the first's pid; master.json names the one that serves.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from master_lite._app import MasterLite, MasterLiteStartError
from tests._support import child_env, wait_until
from tests._support.hosted import hosted_extension, hosted_server_config

pytest_plugins = ["pytest_jupyter.jupyter_server"]


# `master-lite` with its imports done, held at a barrier (one byte on stdin): both processes
# then start in the same millisecond instead of one import time apart.
AT_THE_BARRIER = """
import sys
import master_lite._app, master_lite._master, master_lite._cli as cli
print("ready", flush=True)
sys.stdin.read(1)
sys.exit(cli.main(sys.argv[1:]))
"""


def _master(root: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", AT_THE_BARRIER, "--port", "0", "--root-dir", str(root)],
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_two_masters_started_together_on_a_fresh_root_dir(tmp_path: Path) -> None:
    root = tmp_path / "fresh-root"
    first, second = _master(root), _master(root)
    processes = [first, second]
    try:
        for process in processes:
            assert process.stdout.readline() == "ready\n", process.stderr.read()
        for process in processes:  # release both at once
            process.stdin.write("go")
            process.stdin.close()
        loser = wait_until(
            lambda: next((p for p in processes if p.poll() is not None), None),
            60,
            "one of the two masters to give up",
        )
        winner = second if loser is first else first
        loser.wait(timeout=60)
        error = loser.stderr.read()
        assert loser.returncode == 1, error
        assert f"root dir {root} is in use by another master-lite (pid {winner.pid}" in error
        line = winner.stdout.readline()
        assert line.startswith("master-lite listening on "), line + winner.stderr.read()
        info = json.loads((root / "master.json").read_text())
        assert info["pid"] == winner.pid and info["url"] == line.split()[3]
        assert winner.poll() is None  # still serving
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()


def test_the_lock_is_taken_before_anything_else_and_given_back(tmp_path: Path) -> None:
    """In one process (as a hosted master takes it): the second claim names the holder."""
    root = tmp_path / "root"
    first = MasterLite(root_dir=str(root))
    second = MasterLite(root_dir=str(root))
    first.claim_root_dir()
    try:
        assert sorted(path.name for path in root.iterdir()) == ["master.lock"]
        with pytest.raises(MasterLiteStartError, match=rf"root dir {root} is in use .*pid \d+"):
            second.claim_root_dir()
    finally:
        first.release_root_dir()
    second.claim_root_dir()  # free again once released
    second.release_root_dir()


@pytest.fixture
def holder(tmp_path: Path):
    """A master (its app's claim) holding the root dir the hosted master below is given."""
    app = MasterLite(root_dir=str(tmp_path / "det-root"))
    app.claim_root_dir()
    yield app
    app.release_root_dir()


@pytest.fixture
def jp_server_config(tmp_path, monkeypatch, holder):
    return hosted_server_config(tmp_path, monkeypatch, cpu_slots=1)


def test_a_hosted_master_takes_the_same_lock(jp_serverapp, jp_asyncio_loop, tmp_path) -> None:
    extension = hosted_extension(jp_serverapp)
    with pytest.raises(MasterLiteStartError, match=rf"root dir {tmp_path / 'det-root'} is in use"):
        jp_asyncio_loop.run_until_complete(extension.ensure_started())
    assert not (tmp_path / "det-root" / "master.db").exists()  # it wrote nothing
