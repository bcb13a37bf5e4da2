"""Checkpoint storage that is a bucket (`checkpoint_storage.type: s3` or `gcs`), as the master uses it:
delete a checkpoint's objects (GC, `DELETE /checkpoints/{uuid}`, experiment deletion) and serve
them (`GET /checkpoints/{uuid}/download`).

For s3 the master signs with the keys of the experiment's stored config (the API shows them as
`********`); for gcs with its own Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS).
Its messages name the bucket and prefix, never the keys. There is no path to
confine as for directories: the objects touched are exactly `<prefix>/<uuid>/...` of a uuid the
master checked (`is_checkpoint_uuid`)."""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BUCKET_TYPES = ("s3", "gcs")

_lock = threading.Lock()
_managers: dict[str, Any] = {}


def is_bucket(storage_config: Mapping | None) -> bool:
    """Whether a `checkpoint_storage` section is a bucket (no directory on the master)."""
    return isinstance(storage_config, Mapping) and storage_config.get("type") in BUCKET_TYPES


def manager_of(storage_config: Mapping) -> Any:
    """The storage manager of a bucket config, made once per distinct config (a boto3 or
    google-cloud-storage client costs tens of milliseconds to build)."""
    from determined.common import storage

    key = json.dumps(dict(storage_config), sort_keys=True, default=str)
    with _lock:
        manager = _managers.get(key)
        if manager is None:
            manager = storage.StorageManager.from_config(storage_config)
            _managers[key] = manager
        return manager


def location(storage_config: Mapping, uuid: str) -> str:
    """Where a checkpoint's objects are (`s3://` or `gs://bucket/prefix/uuid`): the record's
    `path`."""
    from determined.common import storage

    if storage_config.get("type") == "gcs":
        return storage.gcs_location(storage_config, uuid)
    return storage.s3_location(storage_config, uuid)


def delete_objects(storage_config: Mapping, uuid: str) -> dict[str, int]:
    """Delete every object of checkpoint `uuid`; the resources deleted. StorageError (its
    message names the bucket and the cause) when the store refuses."""
    return dict(manager_of(storage_config).delete(uuid))


def archive(storage_config: Mapping, uuid: str) -> bytes:
    """The checkpoint's objects as a tar.gz (CheckpointNotFound without any)."""
    manager = manager_of(storage_config)
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="det-download-") as scratch:
        manager.download(uuid, scratch)
        root = Path(scratch)
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for item in sorted(root.rglob("*")):
                tar.add(item, arcname=str(item.relative_to(root)), recursive=False)
    return buffer.getvalue()


__all__ = ["BUCKET_TYPES", "archive", "delete_objects", "is_bucket", "location", "manager_of"]
