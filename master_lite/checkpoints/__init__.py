"""Checkpoints: reports and reads (`Checkpoints`), garbage collection by the experiment's
`checkpoint_storage` policy (`CheckpointCollector`), and where checkpoint storage may be
(`storage_problem`, `storage_roots`: the master's, not the caller's), and the collection of
partial checkpoint directories that no report named (`PartialCheckpoints`)."""

from master_lite.checkpoints._checkpoints import Checkpoints
from master_lite.checkpoints._confinement import (
    ROOTS_SETTING,
    is_checkpoint_uuid,
    owned_checkpoint_dir,
    storage_problem,
    storage_roots,
    under_storage_roots,
)
from master_lite.checkpoints._gc import CheckpointCollector, GcPolicy, checkpoints_to_keep
from master_lite.checkpoints._partials import (
    PARTIAL_GRACE_SECONDS,
    PartialCheckpoints,
    sweep_partials,
)

__all__ = [
    "PARTIAL_GRACE_SECONDS",
    "ROOTS_SETTING",
    "CheckpointCollector",
    "Checkpoints",
    "GcPolicy",
    "PartialCheckpoints",
    "checkpoints_to_keep",
    "is_checkpoint_uuid",
    "owned_checkpoint_dir",
    "storage_problem",
    "storage_roots",
    "sweep_partials",
    "under_storage_roots",
]
