"""The Ray runner: each trial run as Ray actors placed by a Ray cluster."""

from master_lite.runners.ray._runner import RayCluster, RayRunner

__all__ = ["RayCluster", "RayRunner"]
