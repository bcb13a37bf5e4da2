"""The store: the SQLite database (`Database`, _database.py) with the master's repositories.

The rest of the master reads and writes through the repositories (`store.trials.of_experiment`,
`store.experiments.get`), which give typed rows (`_rows.py`); SQL stays in this package.
"""

from __future__ import annotations

import os

from . import _models, _repositories, _series, _unmanaged, _users, _workspaces
from ._database import Database
from ._reads import ReadPool


class Store(Database):
    """One master's database and its repositories, by aggregate."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__(path)
        self.experiments = _repositories.Experiments(self)
        self.trials = _repositories.Trials(self)
        self.allocations = _repositories.Allocations(self)
        self.metrics = _series.Metrics(self)
        self.logs = _series.Logs(self)
        self.checkpoints = _repositories.Checkpoints(self)
        self.contexts = _repositories.Contexts(self)
        self.models = _models.Models(self)
        self.model_versions = _models.ModelVersions(self)
        self.unmanaged = _unmanaged.UnmanagedTrials(self)
        self.users = _users.Users(self)
        self.workspaces = _workspaces.Workspaces(self)
        self.projects = _workspaces.Projects(self)
        # Reads off the event loop, each on a read-only connection (_reads.py).
        self.reads = ReadPool(self)

    def close(self) -> None:
        """Finish the reads under way, then close every connection."""
        self.reads.close()
        super().close()


__all__ = ["Store"]
