"""Checkpoint storage: where a checkpoint lives and how files get there.

`checkpoint_base`/`checkpoint_dir` are the one place that computes paths (the master uses them to
GC and download; the harness to write). `StorageManager` moves files for the storage types that
are plain directories on this machine, `shared_fs` and `directory`; `_s3.S3StorageManager` and
`_gcs.GCSStorageManager` have the same interface for `s3` and `gcs`. `manager_for(config)` picks one.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

Selector = Callable[[str], bool]

SUPPORTED_TYPES = ("shared_fs", "directory", "s3", "gcs")
#: Storage types that are a directory on this machine (the others have no `checkpoint_base`).
LOCAL_TYPES = ("shared_fs", "directory")


def checkpoint_base(storage_config: Mapping) -> pathlib.Path:
    kind = storage_config.get("type")
    if kind == "shared_fs":
        host_path = storage_config.get("host_path")
        if not host_path:
            raise ValueError("checkpoint_storage.host_path: required for type shared_fs")
        # storage_path may be absolute, in which case pathlib's join drops host_path (intended).
        return pathlib.Path(host_path) / (storage_config.get("storage_path") or ".")
    if kind == "directory":
        container_path = storage_config.get("container_path")
        if not container_path:
            raise ValueError("checkpoint_storage.container_path: required for type directory")
        return pathlib.Path(container_path)
    if kind in ("s3", "gcs"):
        raise ValueError(
            f"checkpoint_storage.type: {kind!r} storage is a bucket, not a directory on this machine"
        )
    raise ValueError(
        f"checkpoint_storage.type: {kind!r} is not supported by master_lite "
        f"(use one of {', '.join(SUPPORTED_TYPES)})"
    )


def checkpoint_dir(storage_config: Mapping, uuid: str) -> pathlib.Path:
    return checkpoint_base(storage_config) / uuid


def list_resources(root: str | os.PathLike, selector: Selector | None = None) -> dict[str, int]:
    """Relative path -> size for every file under root; directories end with "/" and size 0."""
    root = pathlib.Path(root)
    resources: dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        if prefix and (selector is None or selector(prefix)):
            resources[prefix] = 0
        for name in sorted(filenames):
            rel = prefix + name
            if selector is not None and not selector(rel):
                continue
            resources[rel] = os.path.getsize(os.path.join(dirpath, name))
    return resources


def _copy_selected(src: pathlib.Path, dst: pathlib.Path, paths: Sequence[str]) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for rel in paths:
        target = dst / rel
        if rel.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)


class StorageManager:
    """Files of checkpoints under one base directory (`<base>/<uuid>/...`)."""

    #: Checkpoints are directories on this machine (read in place, written in place).
    is_local = True

    def __init__(self, base_path: str | os.PathLike) -> None:
        self.base_path = pathlib.Path(base_path)

    @classmethod
    def from_config(cls, storage_config: Mapping) -> Any:
        """The manager of a `checkpoint_storage` config (an `S3StorageManager` for s3, a
        `GCSStorageManager` for gcs)."""
        if storage_config.get("type") == "s3":
            from determined.common.storage._s3 import S3StorageManager

            return S3StorageManager.from_config(storage_config)
        if storage_config.get("type") == "gcs":
            from determined.common.storage._gcs import GCSStorageManager

            return GCSStorageManager.from_config(storage_config)
        return cls(checkpoint_base(storage_config))

    def path_of(self, storage_id: str) -> pathlib.Path:
        return self.base_path / storage_id

    def where(self, storage_id: str) -> str:
        """Where the checkpoint is, for messages."""
        return str(self.path_of(storage_id))

    def resources(self, storage_id: str) -> dict[str, int]:
        """Relative path -> size of the checkpoint's files; CheckpointNotFound without it."""
        with self.restore_path(storage_id) as path:
            return list_resources(path)

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield the checkpoint directory itself: writes land directly in storage."""
        path = self.path_of(storage_id)
        path.mkdir(parents=True, exist_ok=True)
        yield path

    @contextlib.contextmanager
    def restore_path(
        self, storage_id: str, selector: Selector | None = None
    ) -> Iterator[pathlib.Path]:
        """Yield the checkpoint directory; selectors are ignored (everything is directly visible)."""
        path = self.path_of(storage_id)
        if not path.is_dir():
            from determined.errors import CheckpointNotFound

            raise CheckpointNotFound(f"checkpoint {storage_id} not found: no directory {path}")
        yield path

    def upload(
        self, src: str | os.PathLike, storage_id: str, paths: Sequence[str] | None = None
    ) -> None:
        """Copy `paths` (relative, dirs ending "/"; default everything) of src into the checkpoint."""
        src = pathlib.Path(src)
        if paths is None:
            paths = list(list_resources(src))
        _copy_selected(src, self.path_of(storage_id), paths)

    def download(
        self, storage_id: str, dst: str | os.PathLike, selector: Selector | None = None
    ) -> None:
        """Copy the checkpoint's files (those `selector` wants) into dst."""
        with self.restore_path(storage_id) as src:
            _copy_selected(src, pathlib.Path(dst), list(list_resources(src, selector)))

    def delete(self, storage_id: str) -> dict[str, int]:
        """Remove the checkpoint's files; return the resources that were deleted."""
        path = self.path_of(storage_id)
        if not path.exists():
            return {}
        resources = list_resources(path)
        shutil.rmtree(path)
        return resources


def default_user_data_dir() -> pathlib.Path:
    """Where off-cluster checkpoints go: appdirs' user_data_dir("determined") on Linux."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return pathlib.Path(base) / "determined"


def from_override(checkpoint_storage: str | Mapping | None) -> StorageManager | None:
    """`core.init(checkpoint_storage=...)`: a path / file:// URL, or a config dict (not shared_fs)."""
    if checkpoint_storage is None:
        return None
    if isinstance(checkpoint_storage, (str, os.PathLike)):
        text = os.fspath(checkpoint_storage)
        if "://" not in text:
            return StorageManager(text)
        scheme, _, rest = text.partition("://")
        if scheme == "file":
            return StorageManager(rest)
        if scheme == "s3":
            from determined.common.storage._s3 import S3StorageManager

            bucket, _, prefix = rest.partition("/")
            if not bucket:
                raise ValueError(f"checkpoint_storage={text!r}: no bucket (use s3://BUCKET/PREFIX)")
            return S3StorageManager(bucket, prefix=prefix or None)  # type: ignore[return-value]
        if scheme == "gs":
            from determined.common.storage._gcs import GCSStorageManager

            bucket, _, prefix = rest.partition("/")
            if not bucket:
                raise ValueError(f"checkpoint_storage={text!r}: no bucket (use gs://BUCKET/PREFIX)")
            return GCSStorageManager(bucket, prefix=prefix or None)  # type: ignore[return-value]
        raise ValueError(
            f"checkpoint_storage={text!r}: unknown scheme {scheme!r}; use a path, file://, s3:// or gs://"
        )
    if isinstance(checkpoint_storage, Mapping):
        if checkpoint_storage.get("type") == "shared_fs":
            raise ValueError(
                "checkpoint_storage: type shared_fs cannot be passed to core.init(); "
                "pass a path string or {type: directory, container_path: PATH} instead"
            )
        return StorageManager.from_config(checkpoint_storage)
    raise TypeError(
        f"checkpoint_storage must be a str, dict or None, not {type(checkpoint_storage).__name__}"
    )
