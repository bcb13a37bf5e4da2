"""`core_context.checkpoint`: save, load and delete checkpoints in checkpoint storage.

A checkpoint is a directory `<storage base>/<uuid>/` holding the user's files plus
`metadata.json` (exactly the user's metadata dict). master_lite storage is always a local
directory (shared_fs or directory), so `store_path` hands out the storage directory itself and
`restore_path` reads from it in place.
"""
from __future__ import annotations

import contextlib
import datetime
import enum
import hashlib
import json
import logging
import os
import pathlib
import uuid
from typing import Any, Callable, Iterator

from determined.common import storage

logger = logging.getLogger("determined.core")

METADATA_FILE = "metadata.json"
Selector = Callable[[str], bool]


class DownloadMode(str, enum.Enum):
    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"

    def __str__(self) -> str:
        return self.value


def merge_metadata(dicts: list[dict], ranks: list[int]) -> dict:
    """Deep-merge the metadata of several ranks; differing values for one key are an error."""
    merged: dict = {}

    def merge_into(target: dict, source: dict, rank: int, owners: dict, path: str) -> None:
        for key, value in source.items():
            where = f"{path}{key}"
            if key not in target:
                target[key] = value
                owners[where] = rank
            elif isinstance(target[key], dict) and isinstance(value, dict):
                target[key] = dict(target[key])
                merge_into(target[key], value, rank, owners, where + ".")
            elif target[key] != value:
                # The value came with the first rank that set this key or one of its parents.
                owner = next(owners[p] for p in _prefixes(where) if p in owners)
                raise RuntimeError(
                    f"checkpoint metadata conflict at {where!r}: rank {owner} has "
                    f"{target[key]!r}, rank {rank} has {value!r}"
                )

    owners: dict = {}
    for metadata, rank in zip(dicts, ranks):
        merge_into(merged, metadata or {}, rank, owners, "")
    return merged


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _md5(path: pathlib.Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_metadata(directory: pathlib.Path, metadata: dict) -> None:
    with open(directory / METADATA_FILE, "w") as f:
        json.dump(metadata, f, indent=2)


class CheckpointContext:
    """Checkpoints of a trial on the master: files go to storage, records to `POST /checkpoints`."""

    def __init__(
        self,
        distributed: Any,
        storage_manager: storage.StorageManager,
        session: Any = None,
        task_id: str | None = None,
        allocation_id: str | None = None,
        trial_id: int | None = None,
    ) -> None:
        self._dist = distributed
        self._storage_manager = storage_manager
        self._session = session
        self._task_id = task_id
        self._allocation_id = allocation_id
        self._trial_id = trial_id

    # --- reporting (the dummy overrides these) ------------------------------------------------
    def _report_checkpoint(self, storage_id: str, resources: dict[str, int], metadata: dict) -> None:
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
            "reportTime": datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z"),
            "state": "COMPLETED",
        }
        self._session.post("/checkpoints", body)
        logger.info("reported checkpoint %s to the master", storage_id)

    def _report_deleted(self, storage_id: str, resources: dict[str, int]) -> None:
        self._session.patch("/checkpoints", {"checkpoints": [{"uuid": storage_id, "resources": resources}]})

    def get_metadata(self, storage_id: str) -> dict:
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
        storage_id = str(uuid.uuid4()) if (not shard or self._dist.rank == 0) else None
        return self._dist.broadcast(storage_id) if shard else storage_id

    def upload(
        self,
        ckpt_dir: str | os.PathLike | None,
        metadata: dict | None = None,
        *,
        shard: bool = False,
        selector: Selector | None = None,
    ) -> str:
        metadata = dict(metadata or {})
        if not shard:
            self._require_chief("upload")
            if ckpt_dir is None:
                raise ValueError("checkpoint.upload(ckpt_dir=None) is only valid with shard=True")
            storage_id = self._new_storage_id(shard=False)
            ckpt_dir = pathlib.Path(ckpt_dir)
            _write_metadata(ckpt_dir, metadata)
            paths = list(storage.list_resources(ckpt_dir, selector))
            if METADATA_FILE not in paths:
                paths.append(METADATA_FILE)
            self._storage_manager.upload(ckpt_dir, storage_id, paths)
            resources = storage.list_resources(self._storage_manager.path_of(storage_id))
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

        # Which rank uploads which file: the lowest rank that has it; a directory shared by
        # several ranks (and unfiltered) is uploaded once, by its lowest rank.
        owner: dict[str, int] = {}
        contested: dict[str, list[int]] = {}
        seen_dirs: dict[Any, int] = {}
        for r, (key, has_selector, files, _) in enumerate(everyone):
            if key is None:
                continue
            if key in seen_dirs and not has_selector and not everyone[seen_dirs[key]][1]:
                continue
            seen_dirs.setdefault(key, r)
            for rel in files:
                if rel.endswith("/"):
                    owner.setdefault(rel, r)
                elif rel in owner:
                    contested.setdefault(rel, [owner[rel]]).append(r)
                else:
                    owner[rel] = r
        my_hashes = {
            rel: _md5(ckpt_dir / rel) for rel, ranks in contested.items() if rank in ranks
        }
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
        self._dist.allgather(None)  # every shard is in storage before the chief reports
        if rank == 0:
            target = self._storage_manager.path_of(storage_id)
            target.mkdir(parents=True, exist_ok=True)
            _write_metadata(target, merged)
            self._report_checkpoint(storage_id, storage.list_resources(target), merged)
        self._dist.allgather(None)
        return storage_id

    @contextlib.contextmanager
    def store_path(
        self, metadata: dict | None = None, *, shard: bool = False
    ) -> Iterator[tuple[pathlib.Path, str]]:
        metadata = dict(metadata or {})
        if not shard:
            self._require_chief("store_path")
        storage_id = self._new_storage_id(shard)
        with self._storage_manager.store_path(storage_id) as path:
            yield path, storage_id
        if shard:
            everyone = self._dist.allgather(metadata)
            metadata = merge_metadata(everyone, list(range(len(everyone))))
            if self._dist.rank != 0:
                self._dist.allgather(None)
                return
        _write_metadata(path, metadata)
        try:
            self._report_checkpoint(storage_id, storage.list_resources(path), metadata)
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
        DownloadMode(download_mode)
        # Storage is a local directory: every rank reads it in place (selectors don't apply).
        with self._storage_manager.restore_path(storage_id) as path:
            yield path

    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> None:
        download_mode = DownloadMode(download_mode)
        if download_mode is DownloadMode.NoSharedDownload:
            self._storage_manager.download(storage_id, ckpt_dir, selector)
            return
        # Local workers download once (local rank 0), fetching what any of their selectors wants.
        listing = None
        if self._dist.local_rank == 0:
            with self._storage_manager.restore_path(storage_id) as src:
                listing = list(storage.list_resources(src))
        listing = self._dist.broadcast_local(listing)
        wanted = None if selector is None else [p for p in listing if selector(p)]
        wanted_by_all = self._dist.allgather_local(wanted)
        if self._dist.local_rank == 0:
            if any(w is None for w in wanted_by_all):
                paths = listing
            else:
                paths = sorted(set().union(*wanted_by_all))
            with self._storage_manager.restore_path(storage_id) as src:
                storage._copy_selected(src, pathlib.Path(ckpt_dir), paths)
        self._dist.broadcast_local(None)

    def delete(self, storage_id: str) -> None:
        resources = self._storage_manager.delete(storage_id)
        self._report_deleted(storage_id, resources)


class DummyCheckpointContext(CheckpointContext):
    """Off the master: checkpoints are directories on local storage; "reporting" only logs."""

    def __init__(self, distributed: Any, storage_manager: storage.StorageManager) -> None:
        super().__init__(distributed, storage_manager)

    def _report_checkpoint(self, storage_id: str, resources: dict[str, int], metadata: dict) -> None:
        logger.info("saved checkpoint %s", storage_id)

    def _report_deleted(self, storage_id: str, resources: dict[str, int]) -> None:
        logger.info("deleted checkpoint %s", storage_id)

    def get_metadata(self, storage_id: str) -> dict:
        raise NotImplementedError(
            "checkpoint.get_metadata() needs a master; off the master read "
            f"{self._storage_manager.path_of(storage_id) / METADATA_FILE} instead"
        )
