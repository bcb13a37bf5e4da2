"""master_lite: a lightweight Determined-compatible master (SQLite, tornado, local trials).

`MasterLite` is the configurable app (standalone or inside jupyter_server); `Master` is the
facade every API handler calls. Both are imported on first use: `import master_lite` stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MasterLite", "Master"]


def __getattr__(name: str) -> Any:
    if name == "MasterLite":
        from master_lite._app import MasterLite

        return MasterLite
    if name == "Master":
        from master_lite._master import Master

        return Master
    raise AttributeError(f"module 'master_lite' has no attribute {name!r}")
