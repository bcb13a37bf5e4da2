"""Partial checkpoint directories are collected (issue 26, row 16).

A full disk during a checkpoint was handled (the checkpoint was never reported; the trial
resumed from the last complete one), but the uuid-named directory the dying save left stayed
in storage forever: no record names it, so neither the GC nor a user could delete it. Now the
master deletes such directories (unchanged for a grace period) when a trial's run ends and when
it starts; registered checkpoints, saves in progress and anything not uuid-named are kept.

Runs over the real parts and store, with real directories (no processes).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid as uuid_module
from pathlib import Path

from determined.common import storage
from master_lite.checkpoints import PARTIAL_GRACE_SECONDS
from tests._support.parts import SINGLE, settle, started_parts

CONFIG = {**SINGLE, "max_restarts": 0}


def _age(path: Path, seconds: float = PARTIAL_GRACE_SECONDS + 600) -> None:
    """Make `path` and everything under it look last changed `seconds` ago."""
    then = time.time() - seconds
    for directory, _, files in os.walk(path):
        for name in files:
            os.utime(os.path.join(directory, name), (then, then), follow_symlinks=False)
        os.utime(directory, (then, then))


def _checkpoint_dir(base: Path, name: str | None = None, *, aged: bool = True) -> Path:
    path = base / (name or str(uuid_module.uuid4()))
    (path / "sub").mkdir(parents=True)
    (path / "sub" / "model.pt").write_bytes(b"w" * 100)
    if aged:
        _age(path)
    return path


def test_row16_a_dead_saves_directory_is_collected_and_nothing_else(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="master_lite")
    outside = tmp_path / "outside"
    _checkpoint_dir(outside, "precious")

    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, runner):
            ended_exp = parts.experiments.create_experiment(CONFIG, None)
            running_exp = parts.experiments.create_experiment(CONFIG, None)
            [ended] = parts.views.list_trials(ended_exp["id"])
            config = parts.views.experiment_row(ended_exp["id"]).config
            base = storage.checkpoint_base(config["checkpoint_storage"])
            assert base.resolve() == (tmp_path / "root" / "checkpoints").resolve()

            # What the trial that will die left: a save it never reported.
            partial = _checkpoint_dir(base)
            # A checkpoint it did report, as old.
            registered = _checkpoint_dir(base)
            parts.checkpoints.report_checkpoint(
                {
                    "uuid": registered.name,
                    "trial_id": ended["id"],
                    "metadata": {"steps_completed": 5},
                }
            )
            _age(registered)
            # One it reported and then deleted from its own view (a container trial's Core API
            # delete leaves the master's copy): the record says DELETED, the files are garbage.
            deleted = _checkpoint_dir(base)
            parts.checkpoints.report_checkpoint(
                {"uuid": deleted.name, "trial_id": ended["id"], "metadata": {"steps_completed": 6}}
            )
            parts.checkpoints.mark_checkpoints_deleted([{"uuid": deleted.name}])
            _age(deleted)
            # The running trial's save in progress: a new directory, and an old one whose big
            # file is still being written.
            fresh = _checkpoint_dir(base, aged=False)
            slow = _checkpoint_dir(base)
            (slow / "sub" / "model.pt").write_bytes(b"still writing")
            # Not uuid-named: a user's, the staging of container trials, TensorBoard files.
            other = _checkpoint_dir(base, "not-a-checkpoint")
            # A uuid-named symlink to a directory outside the storage.
            link = base / str(uuid_module.uuid4())
            link.symlink_to(outside / "precious", target_is_directory=True)

            allocation_id = parts.runs.allocation_id_of(ended["id"])
            assert allocation_id is not None
            runner.exit(allocation_id, 137)  # died mid-save
            await settle(lambda: not partial.exists() and not deleted.exists())

            # A second pass (as at the master's start) finds nothing more to delete.
            assert await parts.partials.collect() == []
            for kept in (registered, fresh, slow, other):
                assert (kept / "sub" / "model.pt").is_file(), kept
            assert link.is_symlink() and (outside / "precious" / "sub" / "model.pt").is_file()
            [running] = parts.views.list_trials(running_exp["id"])
            assert parts.runs.is_running(running["id"])
            # Once the save in progress stopped changing long ago, it goes as well.
            _age(fresh)
            assert await parts.partials.collect() == [fresh]

    asyncio.run(asyncio.wait_for(body(), 60))
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "partial checkpoints: deleted" in logged
    assert "no checkpoint record names it" in logged


def test_row16_the_master_collects_at_start(tmp_path) -> None:
    from master_lite._master import Master
    from tests._support import wait_until_async

    storage_dir = tmp_path / "root" / "checkpoints"
    partial = _checkpoint_dir(storage_dir)  # left by the previous master's trial
    other = _checkpoint_dir(storage_dir, "kept-by-name")

    async def body() -> None:
        master = Master(tmp_path / "root", cpu_slots=1, gpus=[])
        await master.start("http://127.0.0.1:9")
        try:
            await wait_until_async(lambda: not partial.exists(), 30, "the collection at start")
            assert (other / "sub" / "model.pt").is_file()
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 60))
