"""Hyperparameter sampling (random search) and grid axes (grid search).

A spec maps names to: ``{type: const|int|double|log|categorical, ...}``; any non-dict value (an
implicit const); or a dict without ``type`` (a nested group, any depth). Names are always visited
in sorted order so the same seed draws the same values whatever order the YAML listed them in.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from typing import Any

Path = tuple[str, ...]

_LEAF_TYPES = ("const", "int", "double", "log", "categorical")


def _where(path: Path) -> str:
    return "hyperparameters." + ".".join(path)


def _is_group(value: Any) -> bool:
    return isinstance(value, dict) and "type" not in value


def _check_leaf(path: Path, spec: dict) -> None:
    kind = spec["type"]
    if kind not in _LEAF_TYPES:
        raise ValueError(
            f"{_where(path)}.type: {kind!r} is not a hyperparameter type "
            f"(use one of {', '.join(_LEAF_TYPES)})"
        )
    if kind == "const":
        if "val" not in spec:
            raise ValueError(f"{_where(path)}.val: required for type 'const'")
    elif kind == "categorical":
        if not spec.get("vals"):
            raise ValueError(
                f"{_where(path)}.vals: type 'categorical' needs a non-empty list of values"
            )
    else:
        for bound in ("minval", "maxval"):
            if not isinstance(spec.get(bound), (int, float)) or isinstance(spec.get(bound), bool):
                raise ValueError(
                    f"{_where(path)}.{bound}: type {kind!r} needs a number here "
                    f"(got {spec.get(bound)!r})"
                )
        if kind == "int" and not all(isinstance(spec[b], int) for b in ("minval", "maxval")):
            raise ValueError(
                f"{_where(path)}: type 'int' needs integer minval/maxval "
                f"(got {spec['minval']!r}, {spec['maxval']!r})"
            )
        if kind == "log" and not spec.get("base", 10) > 0:
            raise ValueError(f"{_where(path)}.base: must be > 0 (got {spec.get('base')!r})")


def leaves(spec: dict[str, Any], prefix: Path = ()) -> list[tuple[Path, Any]]:
    """Every leaf (path, spec) in sorted-path order. An empty nested group is a leaf whose spec is
    ``{}`` (it contributes the single value ``{}``)."""
    out: list[tuple[Path, Any]] = []
    for name in sorted(spec):
        value = spec[name]
        path = prefix + (name,)
        if _is_group(value):
            if value:
                out.extend(leaves(value, path))
            else:
                out.append((path, {}))
        else:
            if isinstance(value, dict):
                _check_leaf(path, value)
            out.append((path, value))
    return out


def _assign(target: dict[str, Any], path: Path, value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def _sample_leaf(spec: Any, rng: random.Random) -> Any:
    if not isinstance(spec, dict):
        return copy.deepcopy(spec)  # implicit const
    if not spec:
        return {}  # empty nested group
    kind = spec["type"]
    if kind == "const":
        return copy.deepcopy(spec["val"])
    if kind == "categorical":
        vals = spec["vals"]
        return copy.deepcopy(vals[rng.randrange(len(vals))])
    if kind == "int":
        return rng.randint(spec["minval"], spec["maxval"])
    low, high = float(spec["minval"]), float(spec["maxval"])
    draw = low + rng.random() * (high - low)
    if draw >= high:  # float rounding could land on the excluded upper end
        draw = low
    if kind == "double":
        return draw
    return float(spec.get("base", 10)) ** draw  # log


def sample_hparams(spec: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One random draw of every hyperparameter, nested groups as nested dicts."""
    out: dict[str, Any] = {}
    for path, leaf in leaves(spec):
        _assign(out, path, _sample_leaf(leaf, rng))
    return out


def _round_half_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def _needs_count(path: Path, spec: dict) -> int:
    count = spec.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(
            f"{_where(path)}.count: required (an int >= 1) for type {spec['type']!r} when "
            f"searcher.name is 'grid' (add e.g. count: 3; got {count!r})"
        )
    return count


def _evenly_spaced(low: float, high: float, count: int) -> list[float]:
    if count == 1:
        return [(low + high) / 2]
    return [low + i * (high - low) / (count - 1) for i in range(count)]


def grid_axis(path: Path, spec: Any) -> list[Any]:
    """The values one leaf takes in a grid search."""
    if not isinstance(spec, dict):
        return [spec]
    if not spec:
        return [{}]
    kind = spec["type"]
    if kind == "const":
        return [spec["val"]]
    if kind == "categorical":
        return list(spec["vals"])
    count = _needs_count(path, spec)
    low, high = spec["minval"], spec["maxval"]
    if kind == "int":
        count = min(count, high - low + 1)
        if count == 1:
            return [_round_half_away((low + high) / 2)]
        return [_round_half_away(low + i * (high - low) / (count - 1)) for i in range(count)]
    points = _evenly_spaced(float(low), float(high), count)
    if kind == "double":
        return points
    base = float(spec.get("base", 10))
    return [base**exponent for exponent in points]


def grid_points(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The Cartesian product of every leaf's axis, first (sorted) name varying slowest."""
    found = leaves(spec)
    axes = [grid_axis(path, leaf) for path, leaf in found]
    points = []
    for combination in itertools.product(*axes):
        point: dict[str, Any] = {}
        for (path, _), value in zip(found, combination, strict=False):
            _assign(point, path, copy.deepcopy(value))
        points.append(point)
    return points
