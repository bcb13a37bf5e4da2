"""The checkpoints part: checkpoint reports of trial runs, and checkpoint reads.

Deleting checkpoints after an experiment is the checkpoint GC's (`master_lite/_gc.py`); a
checkpoint that a model version names (`registered_uuids`) is never deleted.
"""

from __future__ import annotations

import asyncio
import io
import tarfile
import time
from pathlib import Path

from determined.common.states import CheckpointState
from master_lite import errors
from master_lite._core import _limits, _serialize
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.checkpoints import _buckets
from master_lite.checkpoints._confinement import is_checkpoint_uuid, owned_checkpoint_dir
from master_lite.runners.container import link_into_storage, shared_fs_base, trial_view_dir
from master_lite.runs._runs import Runs
from master_lite.store import CheckpointRow, registered_message


def _check_metadata_size(metadata: object) -> None:
    problem = _limits.metadata_problem(metadata)
    if problem:
        raise errors.InvalidRequest(problem, [problem])


class Checkpoints:
    """Records reported checkpoints and serves them (JSON, listings, tar archives)."""

    def __init__(self, shared: MasterState, *, views: Views, runs: Runs) -> None:
        self._shared = shared
        self._views = views
        self._runs = runs

    def _trial_of_report(self, record: dict) -> int | None:
        trial_id = record.get("trial_id", record.get("trialId"))
        allocation_id = record.get("allocation_id", record.get("allocationId"))
        if trial_id is None and allocation_id:
            trial_id = self._runs.allocation_row(allocation_id).trial_id
        return None if trial_id is None else int(trial_id)

    async def place_container_checkpoint(self, record: dict) -> None:
        """Before a report is recorded: a container trial saved the checkpoint into its own
        view of the storage (runners/container/_storage.py); its files are hard-linked into
        the storage, where the record will say they are. Nothing for other trials, a uuid
        another trial reported, or one already in the storage. Off the event loop."""

        uuid = record.get("uuid")
        trial_id = self._trial_of_report(record)
        if not is_checkpoint_uuid(uuid) or trial_id is None:
            return  # report_checkpoint says what is wrong
        assert isinstance(uuid, str)
        trial = self._views.trial_row(trial_id)
        existing = self._shared.store.checkpoints.get(uuid)
        if existing is not None and existing.trial_id != trial.id:
            return  # not this trial's: report_checkpoint refuses it (409)
        config = self._views.experiment_row(trial.experiment_id).config
        base = shared_fs_base(config)
        if base is None:
            return
        view = trial_view_dir(base, str(Path(self._shared.root_dir).absolute()), trial.id)
        if not view.is_dir():
            return  # not a container trial
        try:
            await asyncio.to_thread(link_into_storage, view, uuid, base)
        except OSError as exc:
            raise errors.MasterError(
                f"checkpoint {uuid}: its files could not be placed in the checkpoint storage "
                f"{base} ({exc}); it is not registered"
            ) from exc

    def report_checkpoint(self, record: dict) -> dict:
        """A checkpoint a run saved (uuid, metadata.steps_completed, trial or allocation): stored as
        COMPLETED and made the trial's latest; returns its JSON."""
        from determined.common import storage

        uuid = record.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise errors.InvalidRequest("uuid: required (a string)", ["uuid: required"])
        if not is_checkpoint_uuid(uuid):
            # It names a directory of the checkpoint storage that the master may later serve
            # and delete: only a UUID is surely one plain directory name of its own.
            raise errors.InvalidRequest(
                f"uuid: {uuid!r} is not a UUID (8-4-4-4-12 hex digits, as str(uuid.uuid4()))",
                [f"uuid: {uuid!r} is not a UUID"],
            )
        metadata = record.get("metadata")
        if not isinstance(metadata, dict) or not isinstance(metadata.get("steps_completed"), int):
            raise errors.InvalidRequest(
                "metadata.steps_completed: required (an integer); report the number of batches "
                "trained when this checkpoint was saved",
                ["metadata.steps_completed: required"],
            )
        _check_metadata_size(metadata)
        allocation_id = record.get("allocation_id", record.get("allocationId"))
        trial_id = self._trial_of_report(record)
        if trial_id is None:
            raise errors.InvalidRequest("trialId: required", ["trialId: required"])
        trial = self._views.trial_row(int(trial_id))
        config = self._views.experiment_row(trial.experiment_id).config
        storage_config = config["checkpoint_storage"]
        if _buckets.is_bucket(storage_config):
            path: object = _buckets.location(storage_config, uuid)
        else:
            path = storage.checkpoint_dir(storage_config, uuid)
        resources = record.get("resources") or {}
        try:
            report_time = (
                _serialize.parse_time(record.get("report_time", record.get("reportTime")))
                or time.time()
            )
        except ValueError:
            report_time = time.time()
        with self._shared.store.transaction():
            # A record belongs to the trial that first reported it, forever: a report of the
            # same uuid by another trial would move it (and its files' fate) to that trial's
            # experiment, so it is refused; the same trial reporting it again is idempotent.
            existing = self._shared.store.checkpoints.get(uuid)
            if existing is not None and existing.trial_id != trial.id:
                raise errors.Conflict(
                    f"checkpoint {uuid} was reported by trial {existing.trial_id}; trial "
                    f"{trial.id} may not report it (report a new uuid for a new checkpoint)"
                )
            self._shared.store.checkpoints.put(
                {
                    "uuid": uuid,
                    "trial_id": trial.id,
                    "experiment_id": trial.experiment_id,
                    "allocation_id": allocation_id,
                    "steps_completed": metadata["steps_completed"],
                    "metadata": metadata,
                    "resources": resources,
                    "state": str(CheckpointState.COMPLETED),
                    "report_time": report_time,
                    "path": str(path),
                }
            )
            self._shared.store.trials.set_latest_checkpoint(trial.id, uuid)
        checkpoint = self.get_checkpoint(uuid)
        self._shared.events.publish("checkpoint", checkpoint)
        self._views.publish_trial(trial.id)
        return checkpoint

    def _checkpoint_json(self, row: CheckpointRow) -> dict:
        validation = self._shared.store.metrics.validation_at(row.trial_id, row.steps_completed)
        return _serialize.checkpoint_json(
            row, validation_metrics=validation["metrics"] if validation else None
        )

    def checkpoint_row(self, uuid: str) -> CheckpointRow:
        """The checkpoint's stored row; NotFound if there is none."""
        row = self._shared.store.checkpoints.get(uuid)
        if row is None:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        return row

    def get_checkpoint(self, uuid: str) -> dict:
        """One checkpoint as API JSON, with the validation metrics of its step."""
        return self._checkpoint_json(self.checkpoint_row(uuid))

    def list_checkpoints(
        self,
        *,
        experiment_id: int | None = None,
        trial_id: int | None = None,
        state: str | None = None,
    ) -> list[dict]:
        """Checkpoints of an experiment and/or trial, in a state, as API JSON."""
        if experiment_id is not None:
            self._views.experiment_row(experiment_id)
        if trial_id is not None:
            self._views.trial_row(trial_id)
        rows = self._shared.store.checkpoints.matching(
            experiment_id=experiment_id, trial_id=trial_id, state=state
        )
        return [self._checkpoint_json(row) for row in rows]

    def checkpoint_snippet(self, uuid: str) -> dict:
        """The notebook cell that downloads and loads this checkpoint: `{kind, code}`
        (determined.common.checkpoint_snippets); NotFound unless it is COMPLETED."""
        from determined.common import checkpoint_snippets

        row = self.checkpoint_row(uuid)
        if row.state != CheckpointState.COMPLETED:
            raise errors.NotFound(f"checkpoint {uuid} is {row.state}: its files are gone")
        return checkpoint_snippets.checkpoint_snippet(self._checkpoint_json(row))

    def checkpoint_archive(self, uuid: str) -> bytes:
        """The checkpoint's files as a tar.gz (NotFound when they are gone); a bucket's
        objects are fetched from the store (MasterError naming the bucket when it refuses)."""
        checkpoint = self.checkpoint_row(uuid)
        experiment = self._shared.store.experiments.get(checkpoint.experiment_id)
        storage_config = (experiment.config if experiment else {}).get("checkpoint_storage")
        if _buckets.is_bucket(storage_config):
            return self._bucket_archive(checkpoint, storage_config or {})
        path = Path(checkpoint.path)
        if checkpoint.state != CheckpointState.COMPLETED or not path.is_dir():
            raise errors.NotFound(
                f"checkpoint {uuid} has no files at {path} (state {checkpoint.state})"
            )
        owned = owned_checkpoint_dir(path, uuid, self._shared.storage_roots)
        if owned is None:
            # A record from before uuids and storage were confined (or a forged one): its
            # path is not a checkpoint directory under the master's storage.
            raise errors.Forbidden(
                f"checkpoint {uuid}: {path} is not a checkpoint directory under this master's "
                "checkpoint storage; it is not served"
            )
        path = owned
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for item in sorted(path.rglob("*")):
                tar.add(item, arcname=str(item.relative_to(path)), recursive=False)
        return buffer.getvalue()

    def _bucket_archive(self, checkpoint: CheckpointRow, storage_config: dict) -> bytes:
        from determined.common import storage

        if checkpoint.state != CheckpointState.COMPLETED or not is_checkpoint_uuid(checkpoint.uuid):
            raise errors.NotFound(
                f"checkpoint {checkpoint.uuid} has no files (state {checkpoint.state})"
            )
        try:
            return _buckets.archive(storage_config, checkpoint.uuid)
        except FileNotFoundError as exc:  # the harness's CheckpointNotFound: no objects
            raise errors.NotFound(str(exc)) from None
        except (storage.StorageError, ValueError) as exc:
            raise errors.MasterError(f"checkpoint {checkpoint.uuid}: {exc}") from None

    def mark_checkpoints_deleted(self, items: list[dict]) -> None:
        """Mark checkpoints DELETED (whoever deleted their files says so), all or none;
        Conflict for one a model version names."""
        for item in items:
            uuid = item.get("uuid") if isinstance(item, dict) else None
            if not uuid:
                raise errors.InvalidRequest("checkpoints[].uuid: required")
            self.checkpoint_row(uuid)
            # The Core API asks first (`model_versions`) and never deletes these files; a
            # record of a registered checkpoint must not say DELETED either way.
            versions = self._shared.store.model_versions.naming(uuid)
            if versions:
                raise errors.Conflict(registered_message(uuid, versions))
        with self._shared.store.transaction():
            for item in items:
                self._shared.store.checkpoints.mark_deleted(
                    item["uuid"], resources=item.get("resources")
                )

    def set_checkpoint_metadata(self, uuid: str, metadata: dict) -> dict:
        """Replace a checkpoint's metadata (a user's edit: the files in storage keep theirs);
        the checkpoint's JSON after it."""
        self.checkpoint_row(uuid)  # NotFound names it
        _check_metadata_size(metadata)
        self._shared.store.checkpoints.set_metadata(uuid, metadata)
        checkpoint = self.get_checkpoint(uuid)
        self._shared.events.publish("checkpoint", checkpoint)
        return checkpoint

    def registered_uuids(self, uuids: list[str] | set[str]) -> set[str]:
        """Those of `uuids` that a model version names: their files must stay (checkpoint GC,
        checkpoint deletion and experiment deletion keep them)."""
        return self._shared.store.model_versions.registered_among(uuids)

    def protected_uuids(self, experiment_id: int) -> set[str]:
        """The experiment's COMPLETED checkpoints that must outlive it: those a model version
        names, those a trial that is not finished resumes from, and the warm-start sources of
        experiments that are not finished (the checkpoint GC keeps the same ones)."""
        store = self._shared.store
        own = {
            row.uuid
            for row in store.checkpoints.matching(
                experiment_id=experiment_id, state=str(CheckpointState.COMPLETED)
            )
        }
        needed = (
            store.trials.checkpoints_in_use() | store.experiments.warm_start_checkpoints_in_use()
        )
        return (own & needed) | self.registered_uuids(own)

    def publish_deleted(self, uuid: str) -> None:
        """Tell checkpoint subscribers the GC deleted `uuid` (skipped when nobody listens)."""
        if self._shared.events.has_subscribers("checkpoint"):
            self._shared.events.publish("checkpoint", self.get_checkpoint(uuid))


__all__ = ["Checkpoints"]
