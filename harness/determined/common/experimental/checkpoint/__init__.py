"""Checkpoints in the SDK (Determined's `determined.common.experimental.checkpoint`)."""

from determined.common.experimental.checkpoint._checkpoint import (
    Checkpoint,
    CheckpointOrderBy,
    CheckpointSortBy,
    CheckpointState,
    CheckpointTrainingMetadata,
    DownloadMode,
    fetch_files,
    sort_checkpoints,
)

__all__ = [
    "Checkpoint",
    "CheckpointOrderBy",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointTrainingMetadata",
    "DownloadMode",
    "fetch_files",
    "sort_checkpoints",
]
