"""Issue 26 rows 6 and 7: another local Unix user reads nothing of the master's root dir (the
store with its registry passwords and tokens, contexts' code, trials' files, the user token),
and the user token is not in master.json but in a file only the master's user may read.

The other user is real: the test runs as root, creates one with `useradd` and reads as it with
`runuser`. The root dir sits in a directory everyone may enter (as a home directory is), so only
the root dir's own modes keep the other user out.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from master_lite._app._rootdir import make_private
from tests._support import MasterProcess, child_env, context_tarball, wait_for_experiment

pytestmark = pytest.mark.slow

# Saves a checkpoint, reads it back (a trial still reads its work dir and its checkpoints in a
# private root dir), reports.
TRIAL = """
import os
import determined as det

# Never given the user token; its config carries no secret (issue 26 rows 6 and 9).
assert "DET_MASTER_TOKEN" not in os.environ
assert "hunter2" not in os.environ["DET_EXPERIMENT_CONFIG"]
assert "********" in os.environ["DET_EXPERIMENT_CONFIG"]

with det.core.init() as core:
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "weights").write_text("w")
    with core.checkpoint.restore_path(uuid) as path:
        assert (path / "weights").read_text() == "w"
    core.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.5})
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def other_user() -> Iterator[str]:
    """A fresh local Unix user (not the master's)."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"):
        pytest.skip("needs root, useradd and runuser to act as another local user")
    name = f"detother{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A directory every local user may enter and list (as a home directory often is)."""
    parent = Path(tempfile.mkdtemp(prefix="det-privacy-"))
    parent.chmod(0o755)
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _as_user(user: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", *argv], capture_output=True, text=True)


def test_another_user_reads_nothing_of_the_root_dir(other_user: str, open_parent: Path) -> None:
    root = open_parent / "root"
    (open_parent / "public.txt").write_text("anyone\n")
    (open_parent / "public.txt").chmod(0o644)
    with MasterProcess(root, cpu_slots=1) as master:
        config = {
            "name": "private",
            "entrypoint": "python3 train.py",
            "max_restarts": 0,
            "searcher": {"name": "single", "metric": "loss", "max_length": 1},
            "environment": {"registry_auth": {"username": "u", "password": "hunter2"}},
        }
        exp_id = master.create_experiment(config, context_tarball({"train.py": TRIAL}))
        assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"

        # What the master wrote: private from the start.
        assert _mode(root) == 0o700
        for name in ("master.db", "master.json", "master.lock"):
            assert _mode(root / name) == 0o600, name
        for name in ("contexts", "trials", "checkpoints", "private"):
            assert _mode(root / name) == 0o700, name
        assert _mode(root / "private" / "user_token") == 0o600
        trial_files = [path for path in (root / "trials").rglob("*") if path.is_file()]
        contexts = [path for path in (root / "contexts").rglob("*") if path.is_file()]
        assert trial_files and contexts

        # The other user really is another user who can read what is open to it...
        assert _as_user(other_user, "cat", str(open_parent / "public.txt")).stdout == "anyone\n"
        # ...and nothing in the root dir: not the store (registry password), not the contexts'
        # code, not the trials' files, not the user token.
        for path in [
            root / "master.db",
            root / "master.json",
            root / "private" / "user_token",
            contexts[0],
            trial_files[0],
        ]:
            result = _as_user(other_user, "cat", str(path))
            assert result.returncode != 0 and "Permission denied" in result.stderr, path
        for path in (root, root / "contexts", root / "trials", root / "checkpoints"):
            assert _as_user(other_user, "ls", str(path)).returncode != 0, path


def test_master_json_holds_no_token_and_the_cli_reads_the_token_file(open_parent: Path) -> None:
    root = open_parent / "root"
    with MasterProcess(root, cpu_slots=1) as master:
        info = json.loads((root / "master.json").read_text())
        token_file = root / "private" / "user_token"
        assert "token" not in info and info["token_file"] == str(token_file)
        assert token_file.read_text().strip() == master.token
        # `det`'s master discovery (no DET_MASTER): the URL from master.json, the token from the
        # token file, as the master's Unix user.
        env = child_env({"MASTER_LITE_ROOT_DIR": str(root)})
        for name in ("DET_MASTER", "DET_MASTER_ADDR", "DET_MASTER_TOKEN", "DET_SESSION_TOKEN"):
            env.pop(name, None)
        found = subprocess.run(
            [
                sys.executable,
                "-c",
                "from determined.common.api._master import discover_master as d; "
                "a = d(); print(a.url, a.token)",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert found.stdout.split() == [master.url, master.token]
    assert not token_file.exists()  # removed with master.json on a clean stop


def test_an_existing_loose_root_dir_is_tightened_with_a_log_line(
    open_parent: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = open_parent / "old-root"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    (root / "master.db").write_text("")
    (root / "master.db").chmod(0o644)
    (root / "contexts").mkdir()
    (root / "contexts").chmod(0o755)
    with caplog.at_level(logging.INFO, logger="master_lite"):
        make_private(root)
    assert _mode(root) == 0o700
    assert _mode(root / "master.db") == 0o600
    assert _mode(root / "contexts") == 0o700
    assert any("made private" in record.getMessage() for record in caplog.records)


def test_a_shared_sticky_directory_is_never_changed(
    open_parent: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shared = open_parent / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with caplog.at_level(logging.WARNING, logger="master_lite"):
        make_private(shared)
    assert _mode(shared) == 0o1777
    assert any("is shared" in record.getMessage() for record in caplog.records)
