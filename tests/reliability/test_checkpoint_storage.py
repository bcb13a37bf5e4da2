"""Checkpoint storage is the master's, not the caller's (issue 26, rows 1 and 2).

Row 1: a caller with write access opened an unmanaged run whose `checkpoint_storage.host_path`
was any directory, reported a "checkpoint" named like `.ssh`, then downloaded it as a tar and
deleted it from disk. Now the storage must lie under the master's storage roots, a checkpoint
uuid is a UUID, and download and delete touch only uuid-named, non-symlink directories that
resolve under those roots, whatever a record says.

Row 2: a trial reporting another experiment's checkpoint uuid moved the record to its own
experiment (INSERT OR REPLACE), so deleting that experiment deleted the victim's files. Now a
record belongs to the trial that first reported it: another trial gets 409, the same trial's
re-report changes nothing.

Both run over the real parts and store (no processes): the checks are in the master's parts,
under every API route that reaches them.
"""

from __future__ import annotations

import uuid as uuid_module
from pathlib import Path

import pytest

from determined.common.states import CheckpointState
from master_lite import errors
from master_lite._master._wiring import Parts
from master_lite.checkpoints import CheckpointCollector
from tests._support.parts import FakeRunner, run_with_parts

RUN = {
    "name": "attacker",
    "searcher": {"metric": "loss"},
    "external_experiment_id": "exp-attacker",
    "external_trial_id": "trial-1",
    "lease_seconds": 30,
}


def _secret_dir(tmp_path: Path) -> Path:
    """A directory outside the master's storage that nobody may read or delete through it."""
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_ed25519").write_text("PRIVATE KEY")
    return secret


def _collector(parts: Parts) -> CheckpointCollector:
    return CheckpointCollector(
        parts.shared.store, on_deleted=lambda uuid: None, roots=parts.shared.storage_roots
    )


def _forge(parts: Parts, trial_id: int, experiment_id: int, uuid: str, path: Path) -> None:
    """A record as an older master (before these checks) could have stored it."""
    parts.shared.store.checkpoints.put(
        {
            "uuid": uuid,
            "trial_id": trial_id,
            "experiment_id": experiment_id,
            "allocation_id": None,
            "steps_completed": 1,
            "metadata": {"steps_completed": 1},
            "resources": {},
            "state": str(CheckpointState.COMPLETED),
            "report_time": 1.0,
            "path": str(path),
        }
    )


def test_row1_storage_outside_the_masters_roots_cannot_be_read_or_deleted(tmp_path):
    secret = _secret_dir(tmp_path)

    async def body(parts: Parts, runner: FakeRunner) -> None:
        # The run may not put its storage there: 400 naming the field and the setting.
        with pytest.raises(errors.InvalidRequest) as refused:
            parts.unmanaged.open_run(
                {
                    **RUN,
                    "checkpoint_storage": {"type": "shared_fs", "host_path": str(secret.parent)},
                }
            )
        assert "checkpoint_storage.host_path" in str(refused.value)
        assert "MasterLite.checkpoint_storage_roots" in str(refused.value)
        # Nor through `..` or an absolute storage_path under an allowed host_path.
        own = str(parts.shared.root_dir / "checkpoints")
        for storage in (
            {"type": "shared_fs", "host_path": own, "storage_path": "../../home"},
            {"type": "shared_fs", "host_path": own, "storage_path": str(secret.parent)},
            {"type": "directory", "container_path": str(secret.parent)},
        ):
            with pytest.raises(errors.InvalidRequest, match="checkpoint_storage"):
                parts.unmanaged.open_run({**RUN, "checkpoint_storage": storage})
        # An experiment config is held to the same rule.
        with pytest.raises(errors.InvalidRequest, match="MasterLite.checkpoint_storage_roots"):
            parts.experiments.create_experiment(
                {
                    "name": "e",
                    "entrypoint": "true",
                    "searcher": {"name": "single", "metric": "x", "max_length": 1},
                    "checkpoint_storage": {"type": "shared_fs", "host_path": str(secret.parent)},
                },
                None,
            )

        # In its own storage, a uuid that is not a UUID (a directory's name) is refused.
        opened = parts.unmanaged.open_run(RUN)
        trial_id, experiment_id = opened["trial_id"], opened["experiment_id"]
        for bad in (".ssh", "..", "a/b", "not-a-uuid"):
            with pytest.raises(errors.InvalidRequest, match="uuid"):
                parts.checkpoints.report_checkpoint(
                    {"uuid": bad, "trial_id": trial_id, "metadata": {"steps_completed": 1}}
                )

        # A record that names a directory outside the storage (an older master's database)
        # is neither served nor deleted.
        forged = str(uuid_module.uuid4())
        outside = secret.parent / forged
        outside.mkdir()
        (outside / "secret").write_text("s")
        _forge(parts, trial_id, experiment_id, forged, outside)
        with pytest.raises(errors.Forbidden):
            parts.checkpoints.checkpoint_archive(forged)
        with pytest.raises(errors.Forbidden):
            _collector(parts).delete_checkpoint(forged)
        assert (outside / "secret").exists()

        # Nor is a uuid-named symlink in the storage that points out of it.
        linked = str(uuid_module.uuid4())
        link = parts.shared.root_dir / "checkpoints" / linked
        link.symlink_to(secret, target_is_directory=True)
        parts.checkpoints.report_checkpoint(
            {"uuid": linked, "trial_id": trial_id, "metadata": {"steps_completed": 2}}
        )
        with pytest.raises(errors.Forbidden):
            parts.checkpoints.checkpoint_archive(linked)

        # A real checkpoint in the master's storage is served and deleted as before.
        real = str(uuid_module.uuid4())
        (parts.shared.root_dir / "checkpoints" / real).mkdir()
        (parts.shared.root_dir / "checkpoints" / real / "w").write_text("w")
        parts.checkpoints.report_checkpoint(
            {"uuid": real, "trial_id": trial_id, "metadata": {"steps_completed": 3}}
        )
        assert parts.checkpoints.checkpoint_archive(real)
        later = str(uuid_module.uuid4())  # the trial's latest, which it would resume from
        (parts.shared.root_dir / "checkpoints" / later).mkdir()
        parts.checkpoints.report_checkpoint(
            {"uuid": later, "trial_id": trial_id, "metadata": {"steps_completed": 4}}
        )
        _collector(parts).delete_checkpoint(real)
        assert not (parts.shared.root_dir / "checkpoints" / real).exists()
        # The symlinked one (no longer the trial's latest, so deletable if it were real).
        with pytest.raises(errors.Forbidden):
            _collector(parts).delete_checkpoint(linked)
        assert (secret / "id_ed25519").read_text() == "PRIVATE KEY"

    run_with_parts(tmp_path / "root", body)


def test_row1_an_allowed_root_may_hold_a_runs_storage(tmp_path):
    allowed = tmp_path / "shared-storage"
    allowed.mkdir()

    async def body(parts: Parts, runner: FakeRunner) -> None:
        parts.shared.storage_roots = (*parts.shared.storage_roots, allowed.resolve())
        storage = {"type": "shared_fs", "host_path": str(allowed), "storage_path": "runs"}
        opened = parts.unmanaged.open_run({**RUN, "checkpoint_storage": storage})
        uuid = str(uuid_module.uuid4())
        (allowed / "runs" / uuid).mkdir(parents=True)
        parts.checkpoints.report_checkpoint(
            {"uuid": uuid, "trial_id": opened["trial_id"], "metadata": {"steps_completed": 1}}
        )
        assert parts.checkpoints.checkpoint_archive(uuid)

    run_with_parts(tmp_path / "root", body)


def test_row2_a_checkpoint_stays_with_the_trial_that_reported_it(tmp_path):
    async def body(parts: Parts, runner: FakeRunner) -> None:
        victim = parts.unmanaged.open_run({**RUN, "external_experiment_id": "victim"})
        attacker = parts.unmanaged.open_run({**RUN, "external_experiment_id": "attacker"})
        uuid = str(uuid_module.uuid4())
        files = parts.shared.root_dir / "checkpoints" / uuid
        files.mkdir()
        (files / "weights").write_text("w")
        report = {"uuid": uuid, "trial_id": victim["trial_id"], "metadata": {"steps_completed": 5}}
        parts.checkpoints.report_checkpoint(report)
        parts.checkpoints.report_checkpoint(report)  # the same trial again: idempotent

        with pytest.raises(errors.Conflict, match=f"reported by trial {victim['trial_id']}"):
            parts.checkpoints.report_checkpoint(
                {**report, "trial_id": attacker["trial_id"], "metadata": {"steps_completed": 9}}
            )
        row = parts.shared.store.checkpoints.get(uuid)
        assert row is not None
        assert (row.trial_id, row.experiment_id, row.steps_completed) == (
            victim["trial_id"],
            victim["experiment_id"],
            5,
        )
        assert parts.views.get_trial(attacker["trial_id"])["latest_checkpoint"] is None

        # Deleting the attacker's experiment leaves the victim's files and latest checkpoint.
        parts.unmanaged.close_run(attacker["trial_id"], "COMPLETED")
        parts.edits.delete_experiment(attacker["experiment_id"])
        assert (files / "weights").exists()
        assert parts.views.get_trial(victim["trial_id"])["latest_checkpoint"] == uuid
        assert parts.checkpoints.get_checkpoint(uuid)["state"] == "COMPLETED"

    run_with_parts(tmp_path / "root", body)
