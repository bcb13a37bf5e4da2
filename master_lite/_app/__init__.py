"""`MasterLite`, the configurable app that runs the master standalone or inside jupyter_server.

`_settings.py` declares its traits (every setting, its default and environment variable);
`_app.py` builds the master from them and runs it (listen, master.json, stop).
"""

from master_lite._app._app import (
    GC_THRESHOLDS,
    MASTER_JSON,
    MasterLite,
    MasterLiteStartError,
    quiet_garbage_collector,
)
from master_lite._app._hub import HubService, HubServiceError

__all__ = [
    "GC_THRESHOLDS",
    "HubService",
    "HubServiceError",
    "MASTER_JSON",
    "MasterLite",
    "MasterLiteStartError",
    "quiet_garbage_collector",
]
