"""The Native API (`det.experimental.keras.init()`, `det.experimental.create()`, `Mode`).

Importing this package never imports TensorFlow or torch: `det.experimental.keras` and
`det.experimental.estimator` load TensorFlow only when they train.
"""

from __future__ import annotations

import importlib
from typing import Any

from determined.experimental._context import NativeContext, TrialContextBase
from determined.experimental._create import create, test_one_batch
from determined.experimental._mode import Mode
from determined.experimental._native import (
    RunpyGlobals,
    StopLoadingImplementation,
    build_native_config,
    notebook_to_script,
    submit_native,
)

_LAZY_SUBMODULES = frozenset({"keras", "estimator"})


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        module = importlib.import_module(f"determined.experimental.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'determined.experimental' has no attribute {name!r}")


__all__ = [
    "Mode",
    "NativeContext",
    "RunpyGlobals",
    "StopLoadingImplementation",
    "TrialContextBase",
    "build_native_config",
    "create",
    "notebook_to_script",
    "submit_native",
    "test_one_batch",
]
