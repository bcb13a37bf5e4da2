"""`Checkpoint`: a checkpoint the master knows, its training metadata, and downloading it.

Downloading is shared with `det checkpoint download`: `DIRECT` copies the checkpoint's storage
directory when it is readable on this machine (the master reports its absolute `path`; with
`shared_fs` storage on one machine it always is), `MASTER` streams the master's tar.gz of it
(unpacked with the same safety checks as contexts), `AUTO` tries direct first.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import pathlib
import shutil
from typing import Any

from determined import errors as det_errors
from determined.common import api
from determined.common import context as context_mod
from determined.common.experimental import _util

logger = logging.getLogger("determined.client")

# What a checkpoint's archive may unpack to: checkpoints may be far larger than a context, so
# the unpacker keeps its safety checks and drops its size cap.
_NO_SIZE_CAP = 1 << 62


def default_download_dir(uuid: str) -> pathlib.Path:
    """Where `Checkpoint.download()` without `path` puts checkpoint `uuid`:
    `$XDG_CACHE_HOME/determined/checkpoints/<uuid>` (default `~/.cache/...`).

    Not Determined's `checkpoints/<uuid>` under the current directory: in a notebook that
    directory is usually the context every later experiment packs (docs/sdk.md).
    """
    if "/" in uuid or uuid in ("", ".", ".."):
        raise ValueError(f"checkpoint uuid {uuid!r} cannot name a directory")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache, "determined", "checkpoints", uuid)


class DownloadMode(enum.Enum):
    """How `Checkpoint.download` gets the files.

    Attributes:
        DIRECT: copy the storage directory, which must be readable on this machine.
        MASTER: stream a tar.gz through the master.
        AUTO: DIRECT when the storage directory is readable here, else MASTER.
    """

    DIRECT = "direct"
    MASTER = "master"
    AUTO = "auto"

    def __str__(self) -> str:
        return self.value


class CheckpointState(enum.Enum):
    """A checkpoint's state (Determined's members and values); this master reports COMPLETED
    and DELETED only."""

    ACTIVE = "STATE_ACTIVE"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    PARTIALLY_DELETED = "STATE_PARTIALLY_DELETED"


class CheckpointSortBy(enum.Enum):
    """A checkpoint field to sort lists of checkpoints by (Determined's values)."""

    UUID = "SORT_BY_UUID"
    TRIAL_ID = "SORT_BY_TRIAL_ID"
    BATCH_NUMBER = "SORT_BY_BATCH_NUMBER"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    SEARCHER_METRIC = "SORT_BY_SEARCHER_METRIC"


class CheckpointOrderBy(enum.Enum):
    """Deprecated in Determined in favour of `OrderBy`; the same values."""

    ASC = "ORDER_BY_ASC"
    DESC = "ORDER_BY_DESC"


class CheckpointTrainingMetadata:
    """What training produced a checkpoint (Determined's `Checkpoint.training`).

    Attributes:
        experiment_id: the experiment of the trial that saved it.
        trial_id: the trial that saved it.
        steps_completed: the trial's `steps_completed` when it was saved (ours; Determined keeps
            it in `metadata["steps_completed"]`, which is here too).
        validation_metrics: `{"avgMetrics": {...}, "batchMetrics": []}` of the validation
            reported at the same step, `{}` when there was none.
        experiment_config: the experiment's expanded config (read from the master on first use).
        hparams: the trial's hyperparameters (read from the master on first use).
    """

    def __init__(
        self,
        session: api.Session,
        experiment_id: int,
        trial_id: int,
        steps_completed: int,
        validation_metrics: dict[str, Any],
    ) -> None:
        self._session = session
        self.experiment_id = experiment_id
        self.trial_id = trial_id
        self.steps_completed = steps_completed
        self.validation_metrics = validation_metrics
        self._experiment_config: dict[str, Any] | None = None
        self._hparams: dict[str, Any] | None = None

    @property
    def experiment_config(self) -> dict[str, Any]:
        """The experiment's expanded config.

        Raises:
            determined.common.api.errors.NotFoundException: the experiment is gone.
        """
        if self._experiment_config is None:
            answer = self._session.get(f"/experiments/{self.experiment_id}")
            self._experiment_config = dict(answer["experiment"].get("config") or {})
        return self._experiment_config

    @property
    def hparams(self) -> dict[str, Any]:
        """The hyperparameters of the trial that saved the checkpoint.

        Raises:
            determined.common.api.errors.NotFoundException: the trial is gone.
        """
        if self._hparams is None:
            trial = self._session.get(f"/trials/{self.trial_id}")["trial"]
            self._hparams = dict(trial.get("hparams") or {})
        return self._hparams

    def __repr__(self) -> str:
        return (
            f"CheckpointTrainingMetadata(experiment_id={self.experiment_id}, "
            f"trial_id={self.trial_id}, steps_completed={self.steps_completed}, "
            f"validation_metrics={self.validation_metrics})"
        )


class Checkpoint:
    """A checkpoint of a trained model, as the master knows it.

    Usually obtained from `client.get_checkpoint(uuid)`, `Experiment.list_checkpoints()` or
    `Trial.top_checkpoint()`.

    Attributes:
        uuid: the checkpoint's UUID (its directory name in checkpoint storage).
        task_id: `trial-<trial id>` (Determined: the id of the task that saved it).
        allocation_id: the allocation (run) that saved it.
        report_time: when it was reported (ISO-8601 UTC).
        resources: relative path -> size in bytes of every file in it.
        metadata: the metadata it was saved with (`steps_completed` among it).
        state: a `CheckpointState`.
        training: a `CheckpointTrainingMetadata`.
        storage_path: the absolute directory it is stored in on the master's machine (ours).

    All attributes are cached; `reload()` reads them again.
    """

    def __init__(self, session: api.Session, uuid: str) -> None:
        """A checkpoint by UUID; its attributes stay None until `reload()`.

        Args:
            session: a session to the master.
            uuid: the checkpoint's UUID.
        """
        self._session = session
        self.uuid = uuid
        self.task_id: str | None = None
        self.allocation_id: str | None = None
        self.report_time: str | None = None
        self.resources: dict[str, Any] | None = None
        self.metadata: dict[str, Any] | None = None
        self.state: CheckpointState | None = None
        self.training: CheckpointTrainingMetadata | None = None
        self.storage_path: str | None = None

    def _hydrate(self, checkpoint: dict) -> None:
        self.task_id = f"trial-{checkpoint['trial_id']}"
        self.allocation_id = checkpoint.get("allocation_id")
        self.report_time = checkpoint.get("report_time")
        self.resources = dict(checkpoint.get("resources") or {})
        self.metadata = dict(checkpoint.get("metadata") or {})
        self.state = CheckpointState(_util.state_value(checkpoint.get("state")))
        validation = checkpoint.get("validation_metrics")
        self.training = CheckpointTrainingMetadata(
            self._session,
            experiment_id=int(checkpoint["experiment_id"]),
            trial_id=int(checkpoint["trial_id"]),
            steps_completed=int(checkpoint.get("steps_completed") or 0),
            validation_metrics=(
                {"avgMetrics": dict(validation), "batchMetrics": []} if validation else {}
            ),
        )
        self.storage_path = checkpoint.get("path")

    @classmethod
    def _from_json(cls, checkpoint: dict, session: api.Session) -> Checkpoint:
        made = cls(session, str(checkpoint["uuid"]))
        made._hydrate(checkpoint)
        return made

    def reload(self) -> None:
        """Read the checkpoint's attributes from the master again.

        Raises:
            determined.common.api.errors.NotFoundException: no checkpoint has this UUID.
        """
        self._hydrate(self._session.get(f"/checkpoints/{self.uuid}")["checkpoint"])

    def download(self, path: str | None = None, mode: DownloadMode = DownloadMode.AUTO) -> str:
        """Download the checkpoint's files to a local directory.

        As in Determined, nothing is fetched when the directory already holds a checkpoint
        (a `metadata.json` or `MLmodel` file); `metadata.json` is written when the checkpoint
        has none.

        Args:
            path: the directory to put the files in (created), as in Determined. Default:
                `default_download_dir(uuid)`, `determined/checkpoints/<uuid>` in the user's
                cache (`$XDG_CACHE_HOME`, else `~/.cache`), outside any model directory, so a
                later experiment does not pack the download (Determined's default is
                `checkpoints/<uuid>` under the current directory: pass that to get it).
            mode: a `DownloadMode`: DIRECT (copy the storage directory, readable here), MASTER
                (stream through the master) or AUTO (direct when possible, else master).

        Returns:
            The directory, as a string.

        Raises:
            ValueError: the state is unknown (an object made by hand: call `reload()`).
            determined.errors.CheckpointStateException: the checkpoint is not COMPLETED.
            determined.errors.NoDirectStorageAccess: DIRECT, and the storage directory is not
                readable on this machine.
            determined.common.api.errors.APIException: the master could not send it.
        """
        if self.state is None:
            raise ValueError(
                "Checkpoint state is unknown. Please call Checkpoint.reload to refresh."
            )
        if self.state not in (CheckpointState.COMPLETED, CheckpointState.PARTIALLY_DELETED):
            raise det_errors.CheckpointStateException(
                f"checkpoint {self.uuid} is {_util.master_state(self.state)}: only COMPLETED or "
                "PARTIALLY_DELETED checkpoints can be downloaded"
            )
        destination = (
            pathlib.Path(path) if path is not None else default_download_dir(str(self.uuid))
        )
        if not any((destination / name).exists() for name in ("metadata.json", "MLmodel")):
            fetch_files(
                self._session, self.uuid, self.storage_path, destination, DownloadMode(mode)
            )
        metadata_path = destination / "metadata.json"
        if not metadata_path.exists():
            self.write_metadata_file(str(metadata_path))
        return str(destination)

    def write_metadata_file(self, path: str) -> None:
        """Write the checkpoint's metadata as JSON to a file.

        Args:
            path: the file to write.
        """
        pathlib.Path(path).write_text(json.dumps(self.metadata or {}, indent=2, sort_keys=True))

    def _push_metadata(self, metadata: dict[str, Any]) -> None:
        answer = self._session.patch(f"/checkpoints/{self.uuid}", {"metadata": metadata})
        self._hydrate(answer["checkpoint"])

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Add keys to the checkpoint's metadata (replacing those it has); `metadata` becomes
        the master's after it. As in Determined, the files in storage keep their
        `metadata.json`.

        Args:
            metadata: the keys to add or replace (JSON-serializable).

        Raises:
            determined.common.api.errors.NotFoundException: no checkpoint has this UUID.
        """
        self._push_metadata({**(self.metadata or {}), **metadata})

    def remove_metadata(self, keys: list[str]) -> None:
        """Remove top-level keys from the checkpoint's metadata (missing ones are skipped);
        the files in storage keep their `metadata.json`.

        Args:
            keys: the top-level keys to remove.

        Raises:
            determined.common.api.errors.NotFoundException: no checkpoint has this UUID.
        """
        self._push_metadata({k: v for k, v in (self.metadata or {}).items() if k not in keys})

    def delete(self) -> None:
        """Delete the checkpoint's files from storage; it stays listed, DELETED (`state` is
        updated). Determined deletes asynchronously; this master has deleted them on return.

        Raises:
            determined.common.api.errors.NotFoundException: no checkpoint has this UUID.
            determined.common.api.errors.APIException: it is not COMPLETED, or a trial that
                is not finished resumes or warm-starts from it (409).
        """
        self._hydrate(self._session.delete(f"/checkpoints/{self.uuid}")["checkpoint"])
        logger.info("Deleted checkpoint %s.", self.uuid)

    def remove_files(self, globs: list[str]) -> None:
        """Remove files of the checkpoint from storage (not available here).

        Args:
            globs: the globs of the files to remove.

        Raises:
            NotImplementedError: this master has no endpoint for it.
        """
        raise _util.missing_endpoint("Checkpoint.remove_files()")

    def get_metrics(self, group: str | None = None) -> Any:
        """The metrics tasks reported while using this checkpoint (not available here).

        Args:
            group: the metric group.

        Raises:
            NotImplementedError: this master keeps no metrics of tasks that use checkpoints
                (`report_task_using_checkpoint`).
        """
        raise _util.missing_endpoint("Checkpoint.get_metrics()")

    def __repr__(self) -> str:
        if self.training is not None:
            return (
                f"Checkpoint(uuid={self.uuid}, task_id={self.task_id},"
                f" trial_id={self.training.trial_id})"
            )
        return f"Checkpoint(uuid={self.uuid}, task_id={self.task_id})"


def fetch_files(
    session: api.Session,
    uuid: str,
    storage_path: str | None,
    destination: pathlib.Path,
    mode: DownloadMode,
) -> None:
    """Put a checkpoint's files into `destination` (created), directly or through the master.

    The one download of the SDK (`Checkpoint.download`) and `det checkpoint download`.

    Args:
        session: a session to the master.
        uuid: the checkpoint's UUID.
        storage_path: its storage directory as the master reports it (`path`), or None.
        destination: the local directory.
        mode: DIRECT, MASTER or AUTO.

    Raises:
        determined.errors.NoDirectStorageAccess: DIRECT and `storage_path` is not a readable
            directory here.
        determined.common.api.errors.APIException: the master could not send it.
        determined.common.context.ContextError: the archive is unsafe or malformed.
    """
    source = pathlib.Path(storage_path) if storage_path else None
    readable_here = source is not None and source.is_dir()
    if mode is DownloadMode.DIRECT and not readable_here:
        raise det_errors.NoDirectStorageAccess(
            f"checkpoint {uuid} is not readable here at {source}; download it through the master "
            "(mode master)"
        )
    if readable_here and mode is not DownloadMode.MASTER:
        assert source is not None
        shutil.copytree(source, destination, dirs_exist_ok=True)
        return
    if mode is DownloadMode.AUTO:
        logger.info("checkpoint %s is not readable here; downloading it through the master", uuid)
    data = session.get_bytes(f"/checkpoints/{uuid}/download")
    context_mod.unpack(data, destination, limit_bytes=_NO_SIZE_CAP)
