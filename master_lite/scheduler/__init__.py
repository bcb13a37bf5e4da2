"""Scheduling: GPU inventory, slot allocation and the ports of runs.

What runs a trial is `master_lite.runners`'. The runner names this package exported before
(`Runner`, `LaunchSpec`, `LocalRunner`, ...) still resolve here, for deployments' runners
written against them; new code imports them from `master_lite.runners`.
"""

from typing import Any

from ._gpus import FAKE_GPUS_ENV, GPU, discover_gpus, fake_gpus
from ._ports import TRIAL_PORT_NAMES, PortAllocator
from ._scheduler import DEFAULT_PRIORITY, AllocationRequest, Grant, Scheduler


def __getattr__(name: str) -> Any:
    # Resolved on use, not at import: runners import this package's ports.
    import master_lite.runners as runners

    if name in runners.__all__:
        return getattr(runners, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GPU",
    "FAKE_GPUS_ENV",
    "discover_gpus",
    "fake_gpus",
    "DEFAULT_PRIORITY",
    "AllocationRequest",
    "Grant",
    "Scheduler",
    "PortAllocator",
    "TRIAL_PORT_NAMES",
]
