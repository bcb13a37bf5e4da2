"""Scheduling: GPU inventory, slot allocation (the fair_share and priority policies, as a pure
function `decide` and the `Scheduler` that keeps its state), and the ports of runs.

What runs a trial is `master_lite.runners`'. The runner names this package exported before
(`Runner`, `LaunchSpec`, `LocalRunner`, ...) still resolve here, for deployments' runners
written against them; new code imports them from `master_lite.runners`.
"""

from typing import Any

from ._daily import DAY_SECONDS, over_daily_limit
from ._decide import decide
from ._fair_share import water_fill
from ._gpus import FAKE_GPUS_ENV, GPU, discover_gpus, fake_gpus
from ._inventory import POOL_LABEL, RayInventory, node_pool, ray_pool_config
from ._policy import (
    DEFAULT_MIN_RUN_SECONDS,
    DEFAULT_POOL,
    DEFAULT_PRIORITY,
    POLICIES,
    Decision,
    Holding,
    Policy,
    Request,
)
from ._pools import Pool, build_pools, pick_default, pool_json, pools_json
from ._ports import TRIAL_PORT_NAMES, PortAllocator
from ._scheduler import (
    HISTORICAL_POLICY,
    AllocationRequest,
    Grant,
    QueueEntry,
    Scheduler,
    Step,
)


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
    "Step",
    "QueueEntry",
    "HISTORICAL_POLICY",
    "DEFAULT_MIN_RUN_SECONDS",
    "DEFAULT_POOL",
    "POLICIES",
    "Decision",
    "Holding",
    "Policy",
    "Request",
    "decide",
    "DAY_SECONDS",
    "over_daily_limit",
    "water_fill",
    "Pool",
    "build_pools",
    "pick_default",
    "pool_json",
    "pools_json",
    "PortAllocator",
    "TRIAL_PORT_NAMES",
    "POOL_LABEL",
    "RayInventory",
    "node_pool",
    "ray_pool_config",
]
