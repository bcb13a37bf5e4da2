"""Checkpoints: reports and reads (`Checkpoints`), and garbage collection by the experiment's
`checkpoint_storage` policy (`CheckpointCollector`)."""

from master_lite.checkpoints._checkpoints import Checkpoints
from master_lite.checkpoints._gc import CheckpointCollector, GcPolicy, checkpoints_to_keep

__all__ = ["CheckpointCollector", "Checkpoints", "GcPolicy", "checkpoints_to_keep"]
