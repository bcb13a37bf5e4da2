"""Helpers that build the dict form of hyperparameter specs (`{"type": "int", ...}`).

They let a config be written in Python: `{"lr": det.Log(-4, -1, base=10)}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def Constant(value: Any) -> dict:  # noqa: N802 - Determined's public spelling
    return {"type": "const", "val": value}


def Integer(minval: int, maxval: int, count: int | None = None) -> dict:  # noqa: N802
    if minval > maxval:
        raise ValueError(f"Integer: minval {minval} must not exceed maxval {maxval}")
    spec: dict = {"type": "int", "minval": minval, "maxval": maxval}
    if count is not None:
        spec["count"] = count
    return spec


def Double(minval: float, maxval: float, count: int | None = None) -> dict:  # noqa: N802
    if minval > maxval:
        raise ValueError(f"Double: minval {minval} must not exceed maxval {maxval}")
    spec: dict = {"type": "double", "minval": minval, "maxval": maxval}
    if count is not None:
        spec["count"] = count
    return spec


def Log(minval: float, maxval: float, base: float, count: int | None = None) -> dict:  # noqa: N802
    """Values base**e for e drawn uniformly from [minval, maxval] (exponents, not values)."""
    if minval > maxval:
        raise ValueError(f"Log: minval {minval} must not exceed maxval {maxval}")
    if base <= 0:
        raise ValueError(f"Log: base must be positive, got {base}")
    spec: dict = {"type": "log", "minval": minval, "maxval": maxval, "base": base}
    if count is not None:
        spec["count"] = count
    return spec


def Categorical(vals: Sequence[Any]) -> dict:  # noqa: N802
    vals = list(vals)
    if not vals:
        raise ValueError("Categorical: vals must hold at least one value")
    return {"type": "categorical", "vals": vals}
