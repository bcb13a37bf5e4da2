"""What runs inside the Jupyter server: the server extension that hosts master_lite, its
handlers (the export preview), the TensorBoard proxy; or, pointed at a shared master, the proxy
to that master (`SharedMasterProxyHandler`, settings in `choose_shared_master`).

Nothing here runs in a kernel; the kernel side is `jupyter_determined.kernel`. The export
preview reads notebooks with the exporter's pure functions (`kernel._export`), so the preview
and a submission can never disagree about a cell.
"""

from __future__ import annotations

from jupyter_determined.server._extension import (
    AUTH_RESOURCE,
    EXPORT_PREVIEW_PATH,
    TENSORBOARD_PATH,
    URL_SEGMENT,
    DeterminedServerExtension,
    ExportPreviewHandler,
    authorize_jupyter_user,
    master_info,
)
from jupyter_determined.server._preview import CellPreview, ExportPreview, preview_export
from jupyter_determined.server._shared_master import SharedMasterProxyHandler
from jupyter_determined.server._shared_settings import SharedMaster, choose_shared_master
from jupyter_determined.server._tensorboard_proxy import TensorBoardProxyHandler

__all__ = [
    "AUTH_RESOURCE",
    "CellPreview",
    "DeterminedServerExtension",
    "EXPORT_PREVIEW_PATH",
    "ExportPreview",
    "ExportPreviewHandler",
    "SharedMaster",
    "SharedMasterProxyHandler",
    "TENSORBOARD_PATH",
    "TensorBoardProxyHandler",
    "URL_SEGMENT",
    "authorize_jupyter_user",
    "choose_shared_master",
    "master_info",
    "preview_export",
]
