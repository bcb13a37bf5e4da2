"""Determined-compatible harness: Core API (`det.core`), Generic API (`det.generic`), Trial APIs.

Importing `determined` stays fast and framework-free: submodules (core, generic, pytorch, keras,
experimental, ...) are imported the first time they are used as attributes.
"""

from __future__ import annotations

import importlib
from typing import Any

from determined._hparams import Categorical, Constant, Double, Integer, Log
from determined._import import import_from_path
from determined._info import ClusterInfo, RendezvousInfo, ResourcesInfo, TrialInfo, get_cluster_info
from determined.common.harness import VERSION as __version__
from determined.errors import InvalidHP

# The WebUI/log viewer parses "<LEVEL>: [pid] logger: message" to filter by level.
LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"

_LAZY_SUBMODULES = frozenset(
    {
        "core",
        "generic",
        "common",
        "errors",
        "experimental",
        "pytorch",
        "keras",
        "estimator",
        "launch",
        "cli",
        "exec",
    }
)


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        module = importlib.import_module(f"determined.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'determined' has no attribute {name!r}")


__all__ = [
    "Categorical",
    "ClusterInfo",
    "Constant",
    "Double",
    "Integer",
    "InvalidHP",
    "LOG_FORMAT",
    "Log",
    "RendezvousInfo",
    "ResourcesInfo",
    "TrialInfo",
    "__version__",
    "get_cluster_info",
    "import_from_path",
]
