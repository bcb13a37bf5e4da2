"""A multi-node Ray cluster with checkpoint storage that is a node-local path gets a warning
(in the trial's log and the master's): a trial resumed on another node would not find it."""

from __future__ import annotations

import json

from master_lite.runners.ray._storage import node_local_storage_warning


def _env(storage: dict) -> dict[str, str]:
    return {"DET_EXPERIMENT_CONFIG": json.dumps({"checkpoint_storage": storage})}


def test_a_directory_on_several_nodes_is_warned_about():
    warning = node_local_storage_warning(
        _env({"type": "shared_fs", "host_path": "/srv/ckpts"}), nodes=3
    )
    assert warning is not None
    assert "shared_fs at /srv/ckpts on a Ray cluster of 3 nodes" in warning
    assert "use checkpoint_storage type s3 or gcs" in warning
    directory = node_local_storage_warning(
        _env({"type": "directory", "container_path": "/c"}), nodes=2
    )
    assert directory is not None and "directory at /c" in directory


def test_one_node_or_a_bucket_is_not():
    assert node_local_storage_warning(_env({"type": "shared_fs", "host_path": "/x"}), 1) is None
    assert node_local_storage_warning(_env({"type": "s3", "bucket": "b"}), 4) is None
    assert node_local_storage_warning({}, 4) is None  # no config: nothing to say
    assert node_local_storage_warning({"DET_EXPERIMENT_CONFIG": "not json"}, 4) is None
