"""The Ray runner: each trial run as Ray actors placed by a Ray cluster. The master holds a
`RayConnection` (a Ray driver process of its own, restarted when the cluster is lost) and the
`RayRunner` proxy; `RayCluster` and `RayDriver` run in that driver process."""

from master_lite.runners.ray._connection import RayConnection
from master_lite.runners.ray._proxy import RayRunner
from master_lite.runners.ray._runner import RayCluster, RayDriver

__all__ = [
    "RayCluster",
    "RayConnection",
    "RayDriver",
    "RayRunner",
]
