"""The Core API context of `local=True` runs (Keras, Estimator): framework-free, shared by both."""

from __future__ import annotations

import contextlib
import pathlib
import tempfile
from collections.abc import Iterator
from typing import Any

from determined.common import storage


@contextlib.contextmanager
def local_core_context(config: dict, *, test: bool) -> Iterator[Any]:
    """A Core API context for in-process runs: checkpoints in a temp dir (test) or the config's
    local storage."""
    from determined import core

    if test:
        with tempfile.TemporaryDirectory(prefix="det-local-test-") as tmp:
            with core._dummy_init(checkpoint_storage=tmp) as core_context:
                yield core_context
        return
    storage_config = config.get("checkpoint_storage") or {}
    if storage_config.get("type") in ("s3", "gcs"):  # a bucket: the same one off the master
        target: Any = storage_config
    else:
        base = _local_checkpoint_dir(config)
        target = str(base) if base else None
    with core._dummy_init(checkpoint_storage=target) as core_context:
        yield core_context


def _local_checkpoint_dir(config: dict) -> pathlib.Path | None:
    storage_config = config.get("checkpoint_storage") or {}
    if storage_config.get("type") in ("shared_fs", "directory"):
        try:
            return storage.checkpoint_base(storage_config)
        except (KeyError, ValueError, TypeError):
            return None
    return None
