"""SQLite store of the master (WAL, versioned migrations), its repositories by aggregate and
the typed rows they return."""

from ._models import MODEL_ORDERS, Models, ModelVersions, registered_message
from ._queries import MIN_DATAPOINTS, TRIAL_ORDERS
from ._repositories import Allocations, Checkpoints, Contexts, Experiments, Trials
from ._rows import (
    AllocationRow,
    CheckpointRow,
    ContextRow,
    ExperimentRow,
    ModelRow,
    ModelVersionRow,
    Row,
    TokenRow,
    TrialRow,
    UnmanagedTrialRow,
)
from ._schema import MIGRATIONS
from ._series import Logs, Metrics, MetricsQuery
from ._store import Store
from ._unmanaged import UnmanagedTrials
from ._users import OWNER_ID, UserRow, Users
from ._workspaces import (
    DEFAULT_PROJECT_ID,
    DEFAULT_WORKSPACE_ID,
    ProjectRow,
    Projects,
    WorkspaceRow,
    Workspaces,
)

__all__ = [
    "DEFAULT_PROJECT_ID",
    "DEFAULT_WORKSPACE_ID",
    "MIGRATIONS",
    "MIN_DATAPOINTS",
    "OWNER_ID",
    "MODEL_ORDERS",
    "TRIAL_ORDERS",
    "AllocationRow",
    "Allocations",
    "CheckpointRow",
    "Checkpoints",
    "ContextRow",
    "Contexts",
    "ExperimentRow",
    "Experiments",
    "Logs",
    "Metrics",
    "MetricsQuery",
    "ModelRow",
    "ModelVersionRow",
    "ModelVersions",
    "ProjectRow",
    "Projects",
    "Models",
    "Row",
    "Store",
    "TokenRow",
    "TrialRow",
    "Trials",
    "UnmanagedTrialRow",
    "UnmanagedTrials",
    "UserRow",
    "Users",
    "WorkspaceRow",
    "Workspaces",
    "registered_message",
]
