"""Small read-only helpers over a (validated) config, shared by the master and the harness."""

from __future__ import annotations

import re
from typing import Any

from determined.common.expconf._schema import LENGTH_UNITS

_LEGACY_TRIAL_ENTRYPOINT = re.compile(r"^[A-Za-z0-9_.]+:[A-Za-z0-9_]+$")


def length_of(length: int | dict) -> tuple[str | None, int]:
    """Split a length into ``(unit, amount)``: ``{"batches": 5}`` -> ``("batches", 5)``, ``7`` -> ``(None, 7)``."""
    if isinstance(length, int) and not isinstance(length, bool):
        return None, length
    if isinstance(length, dict) and len(length) == 1:
        ((unit, amount),) = length.items()
        if unit in LENGTH_UNITS and isinstance(amount, int) and not isinstance(amount, bool):
            return unit, amount
    raise ValueError(
        f"a length must be an integer or a mapping with exactly one of"
        f" {', '.join(LENGTH_UNITS)} (e.g. {{batches: 100}}), got {length!r}"
    )


def environment_variables(config: dict, *, gpu: bool = False) -> dict[str, str]:
    """The `environment.environment_variables` to set for a trial, as a dict.

    Accepts the list form (`["KEY=VALUE", ...]`) and the per-device form
    (`{cpu: [...], cuda: [...], rocm: [...]}`, picking `cuda` — or legacy `gpu` — when ``gpu``).
    """
    environment = config.get("environment") or {}
    entries: Any = environment.get("environment_variables") or []
    if isinstance(entries, dict):
        if gpu:
            entries = entries.get("cuda") or entries.get("gpu") or []
        else:
            entries = entries.get("cpu") or []
    variables: dict[str, str] = {}
    for entry in entries:
        key, separator, value = str(entry).partition("=")
        if not separator or not key:
            raise ValueError(
                f"environment.environment_variables: {entry!r} must look like KEY=VALUE"
            )
        variables[key] = value
    return variables


def is_legacy_trial_entrypoint(entrypoint: Any) -> bool:
    """True for a `module:TrialClass` entrypoint (run through the Trial API launcher)."""
    return isinstance(entrypoint, str) and bool(_LEGACY_TRIAL_ENTRYPOINT.match(entrypoint))


def searcher_metric(config: dict) -> str | None:
    """The name of the validation metric the searcher optimises (None if absent)."""
    searcher = config.get("searcher") or {}
    metric = searcher.get("metric") if isinstance(searcher, dict) else None
    return metric if isinstance(metric, str) else None
