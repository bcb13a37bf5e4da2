"""The kernel runner: each trial run in a Jupyter kernel (local, the hosting server's, or on a
Jupyter Kernel Gateway)."""

from master_lite.runners.kernel._files import DEFAULT_FILES_LIMIT
from master_lite.runners.kernel._program import (
    GatewayDefault,
    fold_jupyter_gateway,
    kernel_program,
    kernel_settings,
)
from master_lite.runners.kernel._runner import KernelRunner

__all__ = [
    "DEFAULT_FILES_LIMIT",
    "GatewayDefault",
    "KernelRunner",
    "fold_jupyter_gateway",
    "kernel_program",
    "kernel_settings",
]
