"""Determined-compatible harness: Core API (`det.core`), Generic API (`det.generic`), Trial APIs.

Importing `determined` stays fast and framework-free: submodules (core, generic, pytorch, keras,
experimental, ...) are imported the first time they are used as attributes.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from typing import Any

from determined._env_context import EnvContext
from determined._hparams import Categorical, Constant, Double, Integer, Log
from determined._import import import_from_path
from determined._info import ClusterInfo, RendezvousInfo, ResourcesInfo, TrialInfo, get_cluster_info
from determined.common.harness import VERSION as __version__
from determined.errors import InvalidHP

# In a trial container the master mounts the harness's own dependencies (requests, urllib3...)
# here: appended, so the image's own versions win where it has them.
_FALLBACK_PATH = os.environ.get("DET_HARNESS_FALLBACK_PATH")
if _FALLBACK_PATH and _FALLBACK_PATH not in sys.path:
    sys.path.append(_FALLBACK_PATH)
    # requests runs without a charset detector (the harness talks JSON); say nothing about it.
    warnings.filterwarnings("ignore", message="Unable to find acceptable character detection")

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
    "EnvContext",
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
