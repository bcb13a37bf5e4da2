"""`core_context.checkpoint`: save, load and delete checkpoints in checkpoint storage.

A checkpoint is a directory `<storage base>/<uuid>/` holding the user's files plus
`metadata.json` (exactly the user's metadata dict). For storage that is a local directory
(shared_fs or directory) `store_path` hands out the storage directory itself and `restore_path`
reads from it in place; for a bucket (s3) they use a scratch directory that is uploaded when the
block ends / downloaded first (by local rank 0 for the node's processes).

On the master, `store_path`/`upload` return once the files and `metadata.json` are written; the
`POST /checkpoints` record goes out from a background `CheckpointReporter` thread (a synchronous
round trip cost the training loop ~4 ms per checkpoint, bench/bench_harness_overhead.py).
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import json
import logging
import os
import pathlib
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from determined.common import storage
from determined.core._checkpoint_download import local_listing, shared_restore, wanted_paths
from determined.core._checkpoint_merge import (
    METADATA_FILE,
    assign_shards,
    md5,
    merge_metadata,
    write_metadata,
)
from determined.core._checkpoint_reporter import CheckpointReporter

logger = logging.getLogger("determined.core")

Selector = Callable[[str], bool]


class DownloadMode(str, enum.Enum):
    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"

    def __str__(self) -> str:
        return self.value


class CheckpointContext:
    """`core_context.checkpoint`: save, load and delete checkpoints of a trial on the master.

    Built by `det.core.init()`; users do not construct it. Files go to checkpoint storage, records
    to `POST /checkpoints` (from a `CheckpointReporter` thread; `session_factory` makes its
    session, by default a new `Session` to the same master with the same token as `session`).
    """

    def __init__(
        self,
        distributed: Any,
        storage_manager: storage.StorageManager,
        session: Any = None,
        task_id: str | None = None,
        allocation_id: str | None = None,
        trial_id: int | None = None,
        session_factory: Callable[[], Any] | None = None,
        reporter: Any = None,
    ) -> None:
        self._dist = distributed
        self._storage_manager = storage_manager
        self._session = session
        self._task_id = task_id
        self._allocation_id = allocation_id
        self._trial_id = trial_id
        # `reporter`: anything with CheckpointReporter's interface (the report courier's).
        self._reporter = reporter or CheckpointReporter(session_factory or self._new_session)

    def _new_session(self) -> Any:
        from determined.common.api import Session

        return Session(self._session.master_url, self._session.token)

    def _close(self) -> None:
        """Post every checkpoint record still queued; raise a reporting failure."""
        self._reporter.close()

    # --- reporting (the dummy overrides these) ------------------------------------------------
    def _report_checkpoint(
        self, storage_id: str, resources: dict[str, int], metadata: dict
    ) -> None:
        if "steps_completed" not in metadata:
            raise ValueError(
                f"checkpoint {storage_id} was uploaded but cannot be reported: its metadata must "
                "contain 'steps_completed' (e.g. store_path({'steps_completed': steps}))"
            )
        body = {
            "uuid": storage_id,
            "allocationId": self._allocation_id,
            "taskId": self._task_id,
            "trialId": self._trial_id,
            "metadata": metadata,
            "resources": resources,
            "reportTime": datetime.datetime.now(datetime.timezone.utc)
            .isoformat()
            .replace("+00:00", "Z"),
            "state": "COMPLETED",
        }
        # Encoded now, in the caller's thread: the user may change nested metadata once we return
        # (allow_nan=False as requests' json= would: the master's JSON has no NaN).
        self._reporter.submit(storage_id, json.dumps(body, allow_nan=False).encode())

    def _refuse_if_registered(self, storage_id: str) -> None:
        """A checkpoint a model version names is kept: refuse before touching its files."""
        from determined.common.api import errors

        try:
            answer = self._session.get(f"/checkpoints/{storage_id}/model_versions")
        except errors.NotFound:  # (NotFoundException, what the session raises, is one)
            return  # never reported: no version can name it
        versions = answer["model_versions"]
        if versions:
            named = ", ".join(
                f"version {v['version']} of model {v['model_name']!r}" for v in versions
            )
            raise errors.APIError(
                409,
                f"checkpoint {storage_id} is registered in the model registry ({named}) and "
                "cannot be deleted: delete those model versions first (det model delete-version)",
            )

    def _report_deleted(self, storage_id: str, resources: dict[str, int]) -> None:
        self._session.patch(
            "/checkpoints", {"checkpoints": [{"uuid": storage_id, "resources": resources}]}
        )

    def get_metadata(self, storage_id: str) -> dict:
        """The metadata a checkpoint was saved with, as the master recorded it.

        Args:
            storage_id: the checkpoint's id (as returned by `upload()` or `store_path()`).

        Returns:
            The metadata dict (a copy).

        Raises:
            determined.common.api.NotFound: the master knows no such checkpoint.
            RuntimeError: reporting an earlier checkpoint of this process to the master failed.
        """
        self._reporter.flush()  # a checkpoint this process just saved is readable at once
        answer = self._session.get(f"/checkpoints/{storage_id}")
        return dict((answer.get("checkpoint") or {}).get("metadata") or {})

    # --- saving --------------------------------------------------------------------------------
    def _require_chief(self, what: str) -> None:
        if self._dist.rank != 0:
            raise RuntimeError(
                f"checkpoint.{what}(shard=False) may only be called by the chief (rank 0), not rank "
                f"{self._dist.rank}; call it on rank 0 only, or pass shard=True on every rank"
            )

    def _new_storage_id(self, shard: bool) -> str:
        if not shard:
            return str(uuid.uuid4())
        # Every rank of a sharded save writes into the chief's new directory.
        storage_id = str(uuid.uuid4()) if self._dist.rank == 0 else None
        return str(self._dist.broadcast(storage_id))

    def upload(
        self,
        ckpt_dir: str | os.PathLike | None,
        metadata: dict | None = None,
        *,
        shard: bool = False,
        selector: Selector | None = None,
    ) -> str:
        """Copy a directory into checkpoint storage as a new checkpoint and report it.

        The checkpoint gets a new random id; the name of `ckpt_dir` is not kept. Its
        `metadata.json` holds `metadata` (with `shard=False` it is also written into `ckpt_dir`).
        On the master the record is sent in the background: this returns once the files are in
        storage.

        Args:
            ckpt_dir: the directory to upload. With `shard=True`, a rank with nothing to upload
                passes None.
            metadata: JSON-serializable metadata; on the master it must contain
                "steps_completed". With `shard=True` the ranks' dicts are merged.
            shard: False: only the chief (rank 0) calls this. True: every rank must call it (a
                synchronization point); the checkpoint is the union of every rank's files.
            selector: called with each path relative to `ckpt_dir`; returns True to upload it.
                By default everything is uploaded.

        Returns:
            The new checkpoint's storage id (the same on every rank with `shard=True`).

        Raises:
            RuntimeError: `shard=False` on a rank other than 0; with `shard=True`, ranks
                uploading different contents for one file or conflicting metadata values; or
                reporting an earlier checkpoint to the master failed.
            ValueError: `ckpt_dir=None` without `shard=True`, or (on the master) no
                "steps_completed" in `metadata` (the files are then in storage, unreported).
        """
        metadata = dict(metadata or {})
        if not shard:
            self._require_chief("upload")
            self._reporter.raise_error()  # before this checkpoint is written
            if ckpt_dir is None:
                raise ValueError("checkpoint.upload(ckpt_dir=None) is only valid with shard=True")
            storage_id = self._new_storage_id(shard=False)
            ckpt_dir = pathlib.Path(ckpt_dir)
            write_metadata(ckpt_dir, metadata)
            resources = storage.list_resources(ckpt_dir, selector)
            resources[METADATA_FILE] = os.path.getsize(ckpt_dir / METADATA_FILE)
            self._storage_manager.upload(ckpt_dir, storage_id, list(resources))
            self._report_checkpoint(storage_id, resources, metadata)
            return storage_id
        return self._upload_sharded(ckpt_dir, metadata, selector)

    def _upload_sharded(self, ckpt_dir: Any, metadata: dict, selector: Selector | None) -> str:
        storage_id = self._new_storage_id(shard=True)
        rank = self._dist.rank
        mine: dict[str, int] = {}
        dir_key = None
        if ckpt_dir is not None:
            ckpt_dir = pathlib.Path(ckpt_dir)
            st = os.stat(ckpt_dir)
            dir_key = (st.st_dev, st.st_ino)
            mine = storage.list_resources(ckpt_dir, selector)
        everyone = self._dist.allgather((dir_key, selector is not None, sorted(mine), metadata))
        merged = merge_metadata([m for (_, _, _, m) in everyone], list(range(len(everyone))))

        owner, contested = assign_shards(everyone)
        my_hashes = {rel: md5(ckpt_dir / rel) for rel, ranks in contested.items() if rank in ranks}
        all_hashes = self._dist.allgather(my_hashes)
        conflicts = []
        for rel, ranks in sorted(contested.items()):
            if len({all_hashes[r][rel] for r in ranks}) > 1:
                conflicts.append(f"{rel} (ranks {', '.join(map(str, ranks))})")
        if conflicts:
            raise RuntimeError(
                "sharded checkpoint upload: several ranks have different contents for "
                + "; ".join(conflicts)
            )
        my_paths = [rel for rel, r in owner.items() if r == rank]
        if my_paths:
            self._storage_manager.upload(ckpt_dir, storage_id, my_paths)
        # Every shard is in storage before the chief reports; each rank says what it uploaded.
        uploaded = self._dist.allgather({rel: mine[rel] for rel in my_paths})
        if rank == 0:
            resources: dict[str, int] = {}
            for listing in uploaded:
                resources.update(listing)
            with tempfile.TemporaryDirectory() as scratch:
                write_metadata(pathlib.Path(scratch), merged)
                self._storage_manager.upload(scratch, storage_id, [METADATA_FILE])
                resources[METADATA_FILE] = os.path.getsize(pathlib.Path(scratch) / METADATA_FILE)
            self._report_checkpoint(storage_id, dict(sorted(resources.items())), merged)
        self._dist.allgather(None)
        return storage_id

    @contextlib.contextmanager
    def store_path(
        self, metadata: dict | None = None, *, shard: bool = False
    ) -> Iterator[tuple[pathlib.Path, str]]:
        """A context manager giving a directory to save a new checkpoint into.

        Write your files into the yielded directory; when the `with` block ends normally, the
        checkpoint's `metadata.json` is written and the checkpoint is reported. With local
        storage (shared_fs, directory) the directory is the checkpoint's place in storage
        itself, so nothing is copied; with s3 it is a scratch directory uploaded when the block
        ends (then removed). If the block raises, the checkpoint is not reported (nor uploaded).

        Args:
            metadata: JSON-serializable metadata; on the master it must contain
                "steps_completed". With `shard=True` the ranks' dicts are merged.
            shard: False: only the chief (rank 0) calls this. True: every rank must call it (a
                synchronization point), even ranks that write nothing; all write into one
                directory.

        Yields:
            `(path, storage_id)`: the directory to write into and the checkpoint's id.

        Raises:
            RuntimeError: `shard=False` on a rank other than 0; conflicting metadata values
                with `shard=True`; or reporting an earlier checkpoint to the master failed.
            ValueError: (on the master) no "steps_completed" in `metadata`.

        Example::

            with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                torch.save(model.state_dict(), path / "model.pt")
        """
        metadata = dict(metadata or {})
        if not shard:
            self._require_chief("store_path")
            self._reporter.raise_error()  # before the user writes this checkpoint
        storage_id = self._new_storage_id(shard)
        local = self._storage_manager.is_local
        with self._storage_manager.store_path(storage_id) as path:
            yield path, storage_id
            if shard:
                everyone = self._dist.allgather(metadata)
                metadata = merge_metadata(everyone, list(range(len(everyone))))
            if self._dist.rank == 0 or not shard:
                write_metadata(path, metadata)
            # A bucket's scratch directory holds only this rank's files, and is gone after
            # the block: list it now (uploaded when the block ends).
            mine = {} if local else storage.list_resources(path)
        if shard:
            listings = self._dist.allgather(mine)  # every rank's files are in storage now
            if self._dist.rank != 0:
                self._dist.allgather(None)
                return
            for listing in listings:
                mine.update(listing)
        resources = storage.list_resources(path) if local else dict(sorted(mine.items()))
        try:
            self._report_checkpoint(storage_id, resources, metadata)
        finally:
            if shard:
                self._dist.allgather(None)

    # --- loading -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def restore_path(
        self,
        storage_id: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> Iterator[pathlib.Path]:
        """A context manager giving the directory of a checkpoint, to read it.

        With local storage (shared_fs, directory) every rank reads the checkpoint in place:
        nothing is downloaded and no rank waits for another. With s3 the checkpoint is
        downloaded into a scratch directory (removed when the block ends): with
        `LocalWorkersShareDownload` (the default) every process of a node must call this (a
        synchronization point) and local rank 0 downloads once for them all.

        Args:
            storage_id: the checkpoint's id (e.g. `det.get_cluster_info().latest_checkpoint`).
            download_mode: `LocalWorkersShareDownload` or `NoSharedDownload` (each process
                downloads for itself); local storage downloads nothing either way.
            selector: with s3, only the files it returns True for are downloaded (with a
                shared download: those any local process wants); local storage shows all.

        Yields:
            The checkpoint's directory. Do not modify it.

        Raises:
            determined.errors.CheckpointNotFound: no checkpoint `storage_id` in storage.
            ValueError: `download_mode` is not a `DownloadMode`.

        Example::

            with core_context.checkpoint.restore_path(latest_checkpoint) as path:
                model.load_state_dict(torch.load(path / "model.pt"))
        """
        download_mode = DownloadMode(download_mode)
        if self._storage_manager.is_local or download_mode is DownloadMode.NoSharedDownload:
            # A local directory is read in place by every rank (selectors don't apply).
            with self._storage_manager.restore_path(storage_id, selector) as path:
                yield path
            return
        with shared_restore(self._dist, self._storage_manager, storage_id, selector) as path:
            yield path

    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> None:
        """Copy a checkpoint's files into a local directory (created if missing).

        Args:
            storage_id: the checkpoint's id.
            ckpt_dir: where to put the files.
            download_mode: `LocalWorkersShareDownload` (default): every process on a node must
                call this (a synchronization point); local rank 0 copies, once, every file that
                any of their selectors wants, into a directory they share. `NoSharedDownload`:
                each process copies for itself and calls it alone.
            selector: called with each path relative to the checkpoint; returns True to copy
                it. By default everything is copied.

        Raises:
            determined.errors.CheckpointNotFound: no checkpoint `storage_id` in storage.
            ValueError: `download_mode` is not a `DownloadMode`.
        """
        download_mode = DownloadMode(download_mode)
        if download_mode is DownloadMode.NoSharedDownload:
            self._storage_manager.download(storage_id, ckpt_dir, selector)
            return
        # Local workers download once (local rank 0), fetching what any of their selectors wants.
        paths = wanted_paths(
            self._dist, local_listing(self._dist, self._storage_manager, storage_id), selector
        )
        if self._dist.local_rank == 0:
            chosen = set(paths)
            self._storage_manager.download(storage_id, ckpt_dir, chosen.__contains__)
        self._dist.broadcast_local(None)

    def delete(self, storage_id: str) -> None:
        """Delete a checkpoint's files from storage and tell the master it is gone.

        A checkpoint that is not in storage is only reported as deleted.

        Args:
            storage_id: the checkpoint's id.

        Raises:
            RuntimeError: reporting an earlier checkpoint of this process to the master failed.
            determined.common.api.APIError: a model version names the checkpoint (409: its
                files are kept), or the master refused the deletion report.
        """
        self._reporter.flush()  # the master must know a checkpoint before it is marked deleted
        self._refuse_if_registered(storage_id)
        resources = self._storage_manager.delete(storage_id)
        self._report_deleted(storage_id, resources)


class DummyCheckpointContext(CheckpointContext):
    """Off the master: checkpoints are directories on local storage; "reporting" only logs."""

    def __init__(self, distributed: Any, storage_manager: storage.StorageManager) -> None:
        super().__init__(distributed, storage_manager)

    def _close(self) -> None:
        pass

    def _report_checkpoint(
        self, storage_id: str, resources: dict[str, int], metadata: dict
    ) -> None:
        logger.info("saved checkpoint %s", storage_id)

    def _refuse_if_registered(self, storage_id: str) -> None:
        pass  # no master, no model registry

    def _report_deleted(self, storage_id: str, resources: dict[str, int]) -> None:
        logger.info("deleted checkpoint %s", storage_id)

    def get_metadata(self, storage_id: str) -> dict:
        raise NotImplementedError(
            "checkpoint.get_metadata() needs a master; off the master read "
            f"{METADATA_FILE} of {self._storage_manager.where(storage_id)} instead"
        )
