"""Storage failures: a full disk and a read-only root dir give clear errors and never corrupt
the store (SQLite's integrity check passes and what was stored before is intact).

* Disk full is simulated with RLIMIT_FSIZE on the master process (no file may grow past the
  limit; Python ignores SIGXFSZ, so writes fail with EFBIG as on a full disk) — no root tricks
  that could hurt the machine.
* A read-only root dir is a read-only bind mount inside a private mount namespace
  (`unshare -m`), which only the master's process sees; chmod would not stop root. Skipped
  where unprivileged.
"""

from __future__ import annotations

import pathlib
import resource
import shutil
import sqlite3
import subprocess
import sys

import pytest

from tests._support import MasterProcess, child_env

pytestmark = pytest.mark.slow


def _integrity(db: pathlib.Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def _metric_count(db: pathlib.Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    finally:
        conn.close()


def _start_limited_master(root: pathlib.Path, fsize: int) -> MasterProcess:
    """A master whose files may grow to `fsize` bytes (RLIMIT_FSIZE)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return MasterProcess(root, cpu_slots=1, preexec_fn=limit, start_timeout=60)


def test_disk_full_gives_clear_errors_and_keeps_the_store_intact(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "root"
    # First an ordinary master creates the store, an experiment and one trial.
    with MasterProcess(root, cpu_slots=1) as master:
        exp_id = master.create_experiment(
            {
                "name": "disk-full",
                "entrypoint": "sleep 3600",
                "max_restarts": 0,
                "searcher": {"name": "single", "metric": "x", "max_length": 1},
            },
            None,
            activate=False,
        )
    db = root / "master.db"
    # Then one whose files may grow only a little past their current size.
    limit = db.stat().st_size + 256 * 1024
    limited = _start_limited_master(root, limit)
    from determined.common.api import APIError

    session = limited.session
    try:
        failures: list[APIError] = []
        accepted = 0
        for number in range(400):
            body = {
                "config": {
                    "name": f"fill-{number}",
                    "description": "x" * 20_000,
                    "entrypoint": "true",
                    "searcher": {"name": "single", "metric": "x", "max_length": 1},
                },
                "context": None,
                "activate": False,
            }
            try:
                session.post("/experiments", body)
                accepted += 1
            except APIError as exc:
                failures.append(exc)
                if len(failures) >= 3:
                    break
        assert failures, f"{accepted} experiments fitted under a {limit}-byte file limit"
        for failure in failures:
            assert failure.status == 507, failure
            text = str(failure).lower()
            assert "disk" in text or "space" in text or "full" in text, str(failure)
        # The master is still up and still reads.
        assert session.get(f"/experiments/{exp_id}")["experiment"]["name"] == "disk-full"
    finally:
        limited.stop(60)
    assert _integrity(db) == "ok"
    # A master without the limit starts on the same store and sees everything accepted.
    with MasterProcess(root, cpu_slots=1) as master:
        names = [e["name"] for e in master.session.get("/experiments")["experiments"]]
    assert names[0] == "disk-full" and len(names) == 1 + accepted, names


def _unshare_works(tmp_path: pathlib.Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    result = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe} && "
            f"! touch {probe}/x 2>/dev/null",
        ],
        capture_output=True,
    )
    return result.returncode == 0


def _run_read_only(root: pathlib.Path) -> subprocess.CompletedProcess:
    command = (
        f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && "
        f"exec {sys.executable} -m master_lite --port 0 --root-dir {root}"
    )
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", command],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("existing", [False, True], ids=["fresh", "existing-store"])
def test_read_only_root_dir_is_a_one_line_error(tmp_path: pathlib.Path, existing: bool) -> None:
    if not _unshare_works(tmp_path):
        pytest.skip("needs `unshare -m` and mount (a private read-only bind mount)")
    root = tmp_path / "root"
    root.mkdir()
    if existing:
        with MasterProcess(root, cpu_slots=1) as master:
            master.create_experiment(
                {
                    "name": "kept",
                    "entrypoint": "true",
                    "max_restarts": 0,
                    "searcher": {"name": "single", "metric": "x", "max_length": 1},
                },
                None,
                activate=False,
            )
        before = (root / "master.db").read_bytes()
    result = _run_read_only(root)
    assert result.returncode == 1, result
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert str(root) in lines[0] and "writable" in lines[0], lines[0]
    if existing:
        assert (root / "master.db").read_bytes() == before
        assert _integrity(root / "master.db") == "ok"
        with MasterProcess(root, cpu_slots=1) as master:
            assert [e["name"] for e in master.session.get("/experiments")["experiments"]] == [
                "kept"
            ]
