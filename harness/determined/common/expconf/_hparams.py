"""Walking and normalising the `hyperparameters` section."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any


def is_typed_hparam(value: Any) -> bool:
    """A hyperparameter spec is a mapping with a `type` key; a mapping without one is a group."""
    return isinstance(value, dict) and "type" in value


def normalize_hparams(hparams: dict | None) -> dict:
    """Return a new hyperparameters section where every leaf is a `{type: ...}` dict.

    Implicit constants become `{type: const, val: v}`; nested groups stay nested dicts.
    """
    normalized: dict = {}
    for name, value in (hparams or {}).items():
        if is_typed_hparam(value):
            normalized[name] = copy.deepcopy(value)
        elif isinstance(value, dict):
            normalized[name] = normalize_hparams(value)
        else:
            normalized[name] = {"type": "const", "val": copy.deepcopy(value)}
    return normalized


def hparam_leaves(hparams: dict | None) -> list[tuple[tuple[str, ...], dict]]:
    """Every leaf hyperparameter as ``(path, spec)``, sorted by path (names sorted at each level).

    Implicit constants come back as `{type: const, val: v}`. An empty nested group comes back as
    the constant `{}`, so the trial still receives the (empty) group, as Determined does.
    """
    return sorted(_walk(hparams or {}, ()), key=lambda leaf: leaf[0])


def _walk(group: dict, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], dict]]:
    for name, value in group.items():
        path = (*prefix, name)
        if is_typed_hparam(value):
            yield path, value
        elif isinstance(value, dict) and value:
            yield from _walk(value, path)
        elif isinstance(value, dict):
            yield path, {"type": "const", "val": {}}
        else:
            yield path, {"type": "const", "val": value}
