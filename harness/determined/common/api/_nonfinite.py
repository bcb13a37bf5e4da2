"""Non-finite numbers in the master's answers, decoded back to floats.

The master answers strict JSON: a NaN or infinite number (a diverged `loss`) comes as the
string "NaN", "Infinity" or "-Infinity", as Determined's API sends it (docs/rest-api.md,
"Non-finite numbers"). Determined's SDK reads those back as `float("nan")`/`float("inf")` where
it expects a number; so does this one: in metric values (anything under a `metrics` or
`batch_metrics` key) and the number fields `NUMBER_KEYS`. Other strings (a name "NaN", a label
"Infinity") stay strings.
"""

from __future__ import annotations

import math
from typing import Any

NON_FINITE_STRINGS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
# Fields of the API's objects that are numbers (or a number's summary) and may be non-finite.
NUMBER_KEYS = frozenset({"best_validation", "searcher_metric", "progress", "weight"})
METRIC_KEYS = frozenset({"metrics", "batch_metrics", "avg_metrics"})


def may_hold_non_finite(text: str) -> bool:
    """Whether answer text may hold an encoded non-finite number: most do not, and skip the
    walk of `decode_non_finite`."""
    return '"NaN"' in text or 'Infinity"' in text


def _numbers(value: Any) -> Any:
    """Metric values: every non-finite string, at any depth, as its float."""
    if isinstance(value, str):
        return NON_FINITE_STRINGS.get(value, value)
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    return value


def decode_non_finite(value: Any) -> Any:
    """A decoded answer with its encoded non-finite numbers as floats (see the module doc)."""
    if isinstance(value, list):
        return [decode_non_finite(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in METRIC_KEYS:
            out[key] = _numbers(item)
        elif key in NUMBER_KEYS and isinstance(item, str):
            out[key] = NON_FINITE_STRINGS.get(item, item)
        else:
            out[key] = decode_non_finite(item)
    return out


def encode_non_finite(value: Any) -> Any:
    """The reverse, for what is written out as JSON again (a notebook widget's snapshot, which
    Jupyter's message encoder refuses NaN in): each non-finite float as the master's string."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: encode_non_finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_non_finite(item) for item in value]
    return value
