"""The warning a multi-node Ray cluster gets for checkpoint storage that is a path on each node
(issue 31): a trial resumed on another node would not find its checkpoints there."""

from __future__ import annotations

import json
import logging
from typing import Any

logger = logging.getLogger("master_lite")


def node_local_storage_warning(env: dict[str, str], nodes: int) -> str | None:
    """The warning for a run whose checkpoint storage is a directory (shared_fs, directory) on
    a Ray cluster of `nodes` (> 1) alive nodes; None otherwise. `env`: the run's variables."""
    if nodes <= 1:
        return None
    try:
        storage = json.loads(env.get("DET_EXPERIMENT_CONFIG") or "{}").get("checkpoint_storage")
    except (ValueError, AttributeError):
        return None
    if not isinstance(storage, dict) or storage.get("type", "shared_fs") not in (
        "shared_fs",
        "directory",
    ):
        return None
    where = storage.get("host_path") or storage.get("container_path") or "a local directory"
    return (
        f"checkpoint_storage is {storage.get('type', 'shared_fs')} at {where} on a Ray cluster "
        f"of {nodes} nodes: unless that path is one filesystem shared by every node (NFS...), "
        "a trial resumed on another node will not find its checkpoints, and the GC will not "
        "delete those on other nodes; use checkpoint_storage type s3 or gcs (docs/distributed.md)"
    )


def warn_node_local_storage(driver: Any, run: Any) -> None:
    """A checkpoint directory on a cluster of several nodes is each node's own unless it is a
    shared filesystem: say so in the trial's log (and the master's, once an experiment), since a
    trial resumed on another node would not find its checkpoint."""
    try:
        nodes = len([n for n in driver.cluster.nodes() if n["alive"]])
    except Exception:  # noqa: BLE001 - only a warning depends on it
        nodes = 0
    warning = node_local_storage_warning(run.spec.env, nodes)
    if warning is None:
        return
    driver._master_line(run, warning)
    experiment = run.spec.env.get("DET_EXPERIMENT_ID", "")
    if experiment not in driver._warned_experiments:
        driver._warned_experiments.add(experiment)
        logger.warning("experiment %s: %s", experiment, warning)


__all__ = ["node_local_storage_warning", "warn_node_local_storage"]
