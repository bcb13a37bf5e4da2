"""Checkpoints in the SDK (Determined's `determined.common.experimental.checkpoint`)."""

from determined.common.experimental.checkpoint._checkpoint import (
    Checkpoint,
    CheckpointOrderBy,
    CheckpointSortBy,
    CheckpointState,
    CheckpointTrainingMetadata,
    DownloadMode,
    default_download_dir,
    fetch_files,
)
from determined.common.experimental.checkpoint._ordering import (
    metric_order,
    metric_value,
    rank_checkpoints,
    sort_checkpoints,
)

__all__ = [
    "Checkpoint",
    "CheckpointOrderBy",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointTrainingMetadata",
    "DownloadMode",
    "default_download_dir",
    "fetch_files",
    "metric_order",
    "metric_value",
    "rank_checkpoints",
    "sort_checkpoints",
]
