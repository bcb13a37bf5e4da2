"""Directories deleted off the event loop (`_core/_trash.py`): the path is free at once, the
files go in the background, and what a dead master left is swept at the next start."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from master_lite._core import _trash
from master_lite._master import Master
from tests._support import wait_until


def _tree(path: Path, files: int = 50) -> None:
    (path / "sub").mkdir(parents=True)
    for i in range(files):
        (path / "sub" / f"f{i}").write_bytes(b"x" * 100)


def test_discard_frees_the_name_at_once_and_removes_the_files_in_a_thread(tmp_path, monkeypatch):
    target = tmp_path / "trials" / "7"
    _tree(target)
    removing = threading.Event()
    release = threading.Event()
    real_rmtree = _trash.shutil.rmtree
    callers = []

    def held_rmtree(path, *args, **kwargs):
        callers.append(threading.current_thread().name)
        removing.set()
        release.wait(30)
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(_trash.shutil, "rmtree", held_rmtree)
    _trash.discard(target)
    # The removal is held, yet the name is free: a new trial 7 may use it.
    assert removing.wait(30)
    assert not target.exists()
    target.mkdir()
    (target / "new").write_text("a new trial's file")
    [trash] = [p for p in target.parent.iterdir() if p.name.startswith(_trash.TRASH_PREFIX)]
    release.set()
    wait_until(lambda: not trash.exists(), 30, "the trash to be removed")
    assert callers == ["trash"]  # not the caller's thread
    assert (target / "new").read_text() == "a new trial's file"


def test_discard_of_nothing_raises_and_changes_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        _trash.discard(tmp_path / "absent")
    assert list(tmp_path.iterdir()) == []


def test_a_master_start_sweeps_what_a_dead_master_left_in_the_trash(tmp_path):
    root = tmp_path / "root"
    leftover = root / "trials" / f"{_trash.TRASH_PREFIX}3-0a1b2c3d"
    _tree(leftover)
    kept = root / "trials" / "4"
    kept.mkdir(parents=True)

    async def body() -> None:
        master = Master(root, cpu_slots=1, gpus=[])
        await master.start("http://127.0.0.1:9")
        try:
            await asyncio.to_thread(
                wait_until, lambda: not leftover.exists(), 30, "the leftover trash to be swept"
            )
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 60))
    assert kept.is_dir()
