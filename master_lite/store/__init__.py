"""SQLite store of the master (WAL, versioned migrations) and its repositories by aggregate."""

from ._queries import MIN_DATAPOINTS, TRIAL_ORDERS
from ._repositories import Allocations, Checkpoints, Contexts, Experiments, Logs, Metrics, Trials
from ._schema import MIGRATIONS
from ._store import Store

__all__ = [
    "MIGRATIONS",
    "MIN_DATAPOINTS",
    "TRIAL_ORDERS",
    "Allocations",
    "Checkpoints",
    "Contexts",
    "Experiments",
    "Logs",
    "Metrics",
    "Store",
    "Trials",
]
