"""`--config a.b=value` overrides."""

from __future__ import annotations

import copy
from typing import Any

from determined.common.expconf._load import parse_yaml_value


def apply_overrides(config: dict, overrides: list[str]) -> dict:
    """Return a NEW config with each ``"dotted.path=value"`` applied in order.

    The value is parsed as YAML (``8`` is an int, ``[1, 2]`` a list, ``"8"`` a string). Missing
    intermediate mappings are created; a numeric part indexes an existing list. Raises ValueError
    naming the override when it has no ``=``, an empty path, an unparsable value, or a path that
    runs through something that is not a mapping.
    """
    updated = copy.deepcopy(config)
    for override in overrides:
        key, separator, raw_value = override.partition("=")
        key = key.strip()
        parts = key.split(".")
        if not separator or not key or "" in parts:
            raise ValueError(
                f"config override {override!r} must look like dotted.path=value"
                f" (e.g. searcher.max_trials=8)"
            )
        try:
            value = parse_yaml_value(raw_value)
        except Exception as e:  # yaml.YAMLError; yaml is imported lazily
            raise ValueError(
                f"config override {override!r}: cannot parse the value ({e})"
            ) from None
        node: Any = updated
        for depth, part in enumerate(parts[:-1]):
            node = _child(node, part, override, ".".join(parts[: depth + 1]))
        _assign(node, parts[-1], value, override, key)
    return updated


def _child(node: Any, part: str, override: str, where: str) -> Any:
    if isinstance(node, dict):
        if node.get(part) is None:
            node[part] = {}
        return node[part]
    if isinstance(node, list):
        return node[_index(node, part, override, where)]
    raise ValueError(f"config override {override!r}: {where.rsplit('.', 1)[0]} is not a mapping")


def _assign(node: Any, part: str, value: Any, override: str, where: str) -> None:
    if isinstance(node, dict):
        node[part] = value
    elif isinstance(node, list):
        node[_index(node, part, override, where)] = value
    else:
        parent = where.rsplit(".", 1)[0] if "." in where else "<config>"
        raise ValueError(f"config override {override!r}: {parent} is not a mapping")


def _index(items: list, part: str, override: str, where: str) -> int:
    if not part.isdigit() or int(part) >= len(items):
        raise ValueError(
            f"config override {override!r}: {where} is not an index of a list of {len(items)} item(s)"
        )
    return int(part)
