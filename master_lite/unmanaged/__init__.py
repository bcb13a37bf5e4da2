"""Trials that train in a kernel (core_v2), with their leases (`UnmanagedRuns`; their configs:
_config.py)."""

from master_lite.unmanaged._unmanaged import UnmanagedRuns

__all__ = ["UnmanagedRuns"]
