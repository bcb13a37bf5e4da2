"""The experiment config schema's sections that define the search: `searcher` (one closed
schema per searcher name) and `hyperparameters` (typed specs, nested groups, constants).

Part of `_schema.SCHEMA`; see `_schema.py`.
"""

from __future__ import annotations

from typing import Any

from determined.common.expconf._schema_types import BOOL, POSITIVE_INT, STRING

SEARCHER_NAMES = ("single", "random", "grid", "adaptive_asha", "async_halving")
HPARAM_TYPES = ("const", "int", "double", "log", "categorical")

# ---------------------------------------------------------------------------------------------
# searcher: one closed schema per name, built from the fields every searcher shares.

_SEARCHER_COMMON: dict[str, Any] = {
    "name": STRING,
    "metric": STRING,
    "smaller_is_better": BOOL,
    "source_trial_id": {"type": ["integer", "null"]},
    "source_checkpoint_uuid": {"type": ["string", "null"]},
    "max_length": {"$ref": "#/$defs/length_or_int"},
}
_METRIC_HINT = (
    "required for every searcher: the name of a validation metric (e.g. metric: validation_loss)"
)
_TIME_FIELDS: dict[str, Any] = {
    "time_metric": {"type": ["string", "null"]},
    "max_time": {"type": ["integer", "null"], "minimum": 1},
}
_MAX_TRIALS = {"type": "integer", "minimum": 1}
_MAX_CONCURRENT = {
    "type": "integer",
    "minimum": 0,
    "x-minimum-hint": "must be >= 0 (0 means no limit)",
}
_DIVISOR = {"type": "number", "exclusiveMinimum": 1}
_STOP_ONCE = {"type": ["boolean", "null"]}


def _searcher_variant(name: str, extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
    hints = {"metric": _METRIC_HINT}
    for key in required:
        if key not in hints:
            hints[key] = f"required when searcher.name is '{name}'"
    if "max_trials" in required:
        hints["max_trials"] += " (add e.g. max_trials: 16)"
    if "num_rungs" in required:
        hints["num_rungs"] += " (add e.g. num_rungs: 3)"
    return {
        "type": "object",
        "properties": {**_SEARCHER_COMMON, **extra},
        "additionalProperties": False,
        "required": ["metric", *required],
        "x-required-hints": hints,
    }


_SEARCHER_VARIANTS: dict[str, dict[str, Any]] = {
    "single": _searcher_variant("single", {}, []),
    "random": _searcher_variant(
        "random",
        {"max_trials": _MAX_TRIALS, "max_concurrent_trials": _MAX_CONCURRENT},
        ["max_trials"],
    ),
    "grid": _searcher_variant("grid", {"max_concurrent_trials": _MAX_CONCURRENT}, []),
    "adaptive_asha": _searcher_variant(
        "adaptive_asha",
        {
            "max_trials": _MAX_TRIALS,
            "max_concurrent_trials": _MAX_CONCURRENT,
            "mode": {"enum": ["standard", "aggressive", "conservative"]},
            "divisor": _DIVISOR,
            "max_rungs": POSITIVE_INT,
            "bracket_rungs": {"type": "array", "items": POSITIVE_INT},
            "stop_once": _STOP_ONCE,
            **_TIME_FIELDS,
        },
        ["max_trials"],
    ),
    "async_halving": _searcher_variant(
        "async_halving",
        {
            "num_rungs": POSITIVE_INT,
            "max_trials": _MAX_TRIALS,
            "max_concurrent_trials": _MAX_CONCURRENT,
            "divisor": _DIVISOR,
            "stop_once": _STOP_ONCE,
            "max_length": {"$ref": "#/$defs/positive_length"},
            **_TIME_FIELDS,
        },
        ["num_rungs", "max_trials"],
    ),
}

SEARCHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "x-required-hints": {"name": "required: one of " + ", ".join(SEARCHER_NAMES)},
    "properties": {"name": STRING},
    # Unknown and legacy names are reported by _validate.py with a pointed message.
    "allOf": [
        {"if": {"properties": {"name": {"const": name}}, "required": ["name"]}, "then": variant}
        for name, variant in _SEARCHER_VARIANTS.items()
    ],
}

# ---------------------------------------------------------------------------------------------
# hyperparameters: name -> typed spec ({type: ...}), nested group (object without type), or an
# implicit constant (anything else).


def _hparam_variant(kind: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"type": STRING, **properties},
        "required": required,
        "x-required-hints": {
            key: f"required for a hyperparameter of type '{kind}'" for key in required
        },
        "additionalProperties": False,
    }


_COUNT = {"type": "integer", "minimum": 1}
_HPARAM_VARIANTS: dict[str, dict[str, Any]] = {
    "const": _hparam_variant("const", {"val": {}}, ["val"]),
    "int": _hparam_variant(
        "int",
        {"minval": {"type": "integer"}, "maxval": {"type": "integer"}, "count": _COUNT},
        ["minval", "maxval"],
    ),
    "double": _hparam_variant(
        "double",
        {"minval": {"type": "number"}, "maxval": {"type": "number"}, "count": _COUNT},
        ["minval", "maxval"],
    ),
    "log": _hparam_variant(
        "log",
        {
            "minval": {"type": "number"},
            "maxval": {"type": "number"},
            "base": {"type": "number", "exclusiveMinimum": 0},
            "count": _COUNT,
        },
        ["minval", "maxval", "base"],
    ),
    "categorical": _hparam_variant(
        "categorical",
        {
            "vals": {
                "type": "array",
                "minItems": 1,
                "x-min-items-hint": "must list at least one value",
            }
        },
        ["vals"],
    ),
}

TYPED_HPARAM: dict[str, Any] = {
    "type": "object",
    "properties": {"type": {"enum": list(HPARAM_TYPES), "x-what": "hyperparameter type"}},
    "allOf": [
        {"if": {"properties": {"type": {"const": kind}}}, "then": variant}
        for kind, variant in _HPARAM_VARIANTS.items()
    ],
}
