"""The Python SDK's classes (Determined's `determined.common.experimental`); users import them
from `determined.experimental.client` (or `determined.experimental`)."""

from determined.common.experimental._util import OrderBy
from determined.common.experimental.checkpoint import (
    Checkpoint,
    CheckpointOrderBy,
    CheckpointSortBy,
    CheckpointState,
    CheckpointTrainingMetadata,
    DownloadMode,
)
from determined.common.experimental.determined import Determined
from determined.common.experimental.experiment import (
    Experiment,
    ExperimentOrderBy,
    ExperimentSortBy,
    ExperimentState,
)
from determined.common.experimental.metrics import TrialMetrics
from determined.common.experimental.model import Model, ModelOrderBy, ModelSortBy, ModelVersion
from determined.common.experimental.project import Project
from determined.common.experimental.trial import Trial, TrialOrderBy, TrialSortBy, TrialState
from determined.common.experimental.workspace import Workspace

__all__ = [
    "Checkpoint",
    "CheckpointOrderBy",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointTrainingMetadata",
    "Determined",
    "DownloadMode",
    "Experiment",
    "ExperimentOrderBy",
    "ExperimentSortBy",
    "ExperimentState",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "ModelVersion",
    "OrderBy",
    "Project",
    "Trial",
    "TrialMetrics",
    "TrialOrderBy",
    "TrialSortBy",
    "TrialState",
    "Workspace",
]
