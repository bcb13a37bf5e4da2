"""SQLite store of the master (WAL, versioned migrations)."""

from ._schema import MIGRATIONS
from ._store import Store

__all__ = ["Store", "MIGRATIONS"]
