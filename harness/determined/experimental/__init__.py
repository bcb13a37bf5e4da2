"""The Native API (`det.experimental.keras.init()`, `det.experimental.create()`, `Mode`) and
the Python SDK (`det.experimental.client`, `det.experimental.Determined`, `Experiment`, `Trial`,
`Checkpoint`, ...).

Importing this package never imports TensorFlow or torch: `det.experimental.keras` and
`det.experimental.estimator` load TensorFlow only when they train. The SDK is imported on first
use of one of its names.
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

_LAZY_SUBMODULES = frozenset({"keras", "estimator", "client", "core_v2"})
# Determined's SDK names here, from determined.common.experimental (its modules `checkpoint`,
# `metrics` and `model` too).
_SDK_NAMES = frozenset(
    {
        "Checkpoint",
        "Determined",
        "Experiment",
        "Model",
        "ModelOrderBy",
        "ModelSortBy",
        "ModelVersion",
        "OrderBy",
        "Trial",
        "TrialOrderBy",
        "TrialSortBy",
        "checkpoint",
        "metrics",
        "model",
    }
)


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        module = importlib.import_module(f"determined.experimental.{name}")
        globals()[name] = module
        return module
    if name in _SDK_NAMES:
        sdk = importlib.import_module("determined.common.experimental")
        value = getattr(sdk, name)
        globals()[name] = value
        return value
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
