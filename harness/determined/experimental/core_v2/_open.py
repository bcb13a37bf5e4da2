"""Opening an unmanaged run: the request body, and who opens it when several ranks train."""

from __future__ import annotations

import os
import pathlib
import secrets
from typing import Any

from determined.core._distributed import DistributedContext
from determined.experimental.core_v2._config import Config
from determined.experimental.core_v2._run import UnmanagedRun


def _storage_dict(checkpoint_storage: str | dict | None) -> dict | None:
    """A storage path shortcut as the master's storage config."""
    if checkpoint_storage is None or isinstance(checkpoint_storage, dict):
        return checkpoint_storage
    if isinstance(checkpoint_storage, str | os.PathLike):
        path = str(checkpoint_storage).removeprefix("file://")
        return {
            "type": "shared_fs",
            "host_path": str(pathlib.Path(path).absolute()),
            "storage_path": ".",
        }
    raise TypeError(
        f"checkpoint_storage: expected a directory path or a storage dict, got "
        f"{type(checkpoint_storage).__name__}"
    )


def open_body(config: Config, checkpoint_storage: str | dict | None) -> dict:
    """The body of `POST /unmanaged/trials` for `config` (storage given as a path or a dict)."""
    body: dict[str, Any] = {
        "name": config.name or f"unmanaged-{secrets.token_hex(4)}",
        "hparams": dict(config.hparams or {}),
        "external_experiment_id": config.external_experiment_id,
        "external_trial_id": config.external_trial_id,
    }
    for key in ("data", "description", "labels", "searcher", "workspace", "project"):
        if getattr(config, key) is not None:
            body[key] = getattr(config, key)
    storage_config = _storage_dict(checkpoint_storage or config.checkpoint_storage)
    if storage_config is not None:
        body["checkpoint_storage"] = storage_config
    return body


def open_run(
    session: Any,
    body: dict,
    distributed: DistributedContext | None,
    lease_seconds: float,
    capture_output: bool,
) -> UnmanagedRun:
    """Open the run; with several ranks, as Determined does: the chief opens (or resumes) the
    trial and hands the master's answer (the trial, its token) to the other ranks, so every
    rank reports into one trial with one token."""
    if distributed is None or distributed.size <= 1:
        return UnmanagedRun(
            session, body, lease_seconds=lease_seconds, capture_output=capture_output
        )
    if distributed.rank == 0:
        try:
            run = UnmanagedRun(
                session, body, lease_seconds=lease_seconds, capture_output=capture_output
            )
        except BaseException as exc:
            # The other ranks wait in the broadcast: tell them, or they would wait forever.
            distributed.broadcast({"error": f"{type(exc).__name__}: {exc}"})
            raise
        distributed.broadcast({"answer": run.answer})
        return run
    shared = distributed.broadcast(None)
    if "error" in shared:
        raise RuntimeError(
            f"core_v2.init on rank {distributed.rank}: the chief (rank 0) could not open the "
            f"run: {shared['error']}"
        )
    return UnmanagedRun(session, body, capture_output=capture_output, opened=shared["answer"])


__all__ = ["open_body", "open_run"]
