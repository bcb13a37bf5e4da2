"""Where Keras TensorBoard callbacks write under Determined.

The managed loop records the trial's TensorBoard directory (`core_context.train.
get_tensorboard_path()`, which the Core API copies to checkpoint storage after each metrics
report); `det.keras.callbacks.TensorBoard` writes there. Off the master (local runs) it is
`<tmp>/tensorboard-<allocation id>-0`, Determined's own off-cluster directory.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import Any

_active: pathlib.Path | None = None


def set_active_path(path: Any) -> None:
    """Record the running trial's TensorBoard directory (None: there is none)."""
    global _active
    _active = pathlib.Path(path) if path else None


def active_path() -> pathlib.Path:
    """The running trial's TensorBoard directory, or the off-cluster one."""
    if _active is not None:
        return _active
    allocation = os.environ.get("DET_ALLOCATION_ID", "")
    return pathlib.Path(tempfile.gettempdir()) / f"tensorboard-{allocation}-0"


def flush_writers(callback: Any) -> None:
    """Flush a Keras TensorBoard callback's event writers (Keras 3 and tf_keras keep them in
    `_writers`), so the files on disk hold every summary written so far."""
    for writer in list(getattr(callback, "_writers", {}).values()):
        writer.flush()
