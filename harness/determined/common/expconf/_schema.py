"""The experiment config's JSON schema (draft 2020-12), kept as a plain dict.

The schema covers structure: types, ranges, closed objects, required keys per searcher.
Checks that read across fields (minval < maxval, grid counts, ASHA's two forms, storage types
master_lite cannot use) live in `_validate.py`.

Keys starting with ``x-`` are ours: jsonschema ignores unknown keywords, and `_validate.py` reads
them to turn raw jsonschema errors into messages that tell the user what to write instead.
"""

from __future__ import annotations

from typing import Any

SCHEMA_ID = "https://jupyter-determined.invalid/schemas/expconf/v0/experiment.json"

MAX_SEED = 2**31  # exclusive; Determined draws seeds in [0, 2^31)

SEARCHER_NAMES = ("single", "random", "grid", "adaptive_asha", "async_halving")
CHECKPOINT_STORAGE_TYPES = ("shared_fs", "directory", "s3", "gcs", "azure")
HPARAM_TYPES = ("const", "int", "double", "log", "categorical")
LENGTH_UNITS = ("batches", "records", "epochs")


_STRING = {"type": "string"}
_BOOL = {"type": "boolean"}
_NON_NEGATIVE_INT = {"type": "integer", "minimum": 0}
_POSITIVE_INT = {"type": "integer", "minimum": 1}
_STRING_LIST = {"type": "array", "items": {"type": "string"}}
_ANY_OBJECT_OR_NULL = {"type": ["object", "null"]}
_ABSOLUTE_PATH = {
    "type": "string",
    "pattern": "^/",
    "x-pattern-hint": "must be an absolute path (starting with '/')",
}

# ---------------------------------------------------------------------------------------------
# searcher: one closed schema per name, built from the fields every searcher shares.

_SEARCHER_COMMON: dict[str, Any] = {
    "name": _STRING,
    "metric": _STRING,
    "smaller_is_better": _BOOL,
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
            "max_rungs": _POSITIVE_INT,
            "bracket_rungs": {"type": "array", "items": _POSITIVE_INT},
            "stop_once": _STOP_ONCE,
            **_TIME_FIELDS,
        },
        ["max_trials"],
    ),
    "async_halving": _searcher_variant(
        "async_halving",
        {
            "num_rungs": _POSITIVE_INT,
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
    "properties": {"name": _STRING},
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
        "properties": {"type": _STRING, **properties},
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

_TYPED_HPARAM: dict[str, Any] = {
    "type": "object",
    "properties": {"type": {"enum": list(HPARAM_TYPES), "x-what": "hyperparameter type"}},
    "allOf": [
        {"if": {"properties": {"type": {"const": kind}}}, "then": variant}
        for kind, variant in _HPARAM_VARIANTS.items()
    ],
}

# ---------------------------------------------------------------------------------------------
# checkpoint_storage

_STORAGE_COMMON: dict[str, Any] = {
    "type": _STRING,
    "save_experiment_best": _NON_NEGATIVE_INT,
    "save_trial_best": _NON_NEGATIVE_INT,
    "save_trial_latest": _NON_NEGATIVE_INT,
}
_NULLABLE_STRING = {"type": ["string", "null"]}
_SHARED_FS_FIELDS: dict[str, Any] = {
    "host_path": _ABSOLUTE_PATH,
    "storage_path": _NULLABLE_STRING,
    "propagation": _NULLABLE_STRING,
    "container_path": _NULLABLE_STRING,
    "checkpoint_path": _NULLABLE_STRING,
    "tensorboard_path": _NULLABLE_STRING,
}
_STORAGE_VARIANTS: dict[str, dict[str, Any]] = {
    "shared_fs": _SHARED_FS_FIELDS,
    "directory": {"container_path": {"type": "string", "minLength": 1}},
    "s3": {
        key: _NULLABLE_STRING
        for key in ("bucket", "access_key", "secret_key", "endpoint_url", "prefix")
    },
    "gcs": {key: _NULLABLE_STRING for key in ("bucket", "prefix")},
    "azure": {
        key: _NULLABLE_STRING
        for key in ("container", "connection_string", "account_url", "credential")
    },
}


def _closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False, **extra}


CHECKPOINT_STORAGE_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {"type": {"type": "string"}},
    "allOf": [
        {
            "if": {"type": "object", "properties": {"type": {"const": kind}}, "required": ["type"]},
            "then": _closed({**_STORAGE_COMMON, **fields}),
        }
        for kind, fields in _STORAGE_VARIANTS.items()
    ]
    + [
        # Without a type the section is merged over the master's default (shared_fs).
        {
            "if": {"type": "object", "not": {"required": ["type"]}},
            "then": _closed({**_STORAGE_COMMON, **_SHARED_FS_FIELDS}),
        }
    ],
}

# ---------------------------------------------------------------------------------------------
# environment, resources, and the rest

_ENV_VAR_LIST = {
    "type": "array",
    "items": {
        "type": "string",
        "pattern": "^[^=]+=",
        "x-pattern-hint": "must look like KEY=VALUE",
    },
}
ENVIRONMENT_SCHEMA = _closed(
    {
        "image": {
            "type": ["string", "object", "null"],
            "properties": {key: _STRING for key in ("cpu", "cuda", "rocm", "gpu")},
            "additionalProperties": False,
        },
        "environment_variables": {
            "type": ["array", "object"],
            "items": _ENV_VAR_LIST["items"],
            "properties": {key: _ENV_VAR_LIST for key in ("cpu", "cuda", "rocm", "gpu")},
            "additionalProperties": False,
        },
        "ports": {"type": "object", "additionalProperties": {"type": "integer"}},
        "proxy_ports": {
            "type": "array",
            "items": _closed(
                {
                    "proxy_port": {"type": "integer"},
                    "proxy_tcp": _BOOL,
                    "unauthenticated": _BOOL,
                    "default_service_id": _BOOL,
                },
                required=["proxy_port"],
            ),
        },
        "force_pull_image": _BOOL,
        "registry_auth": _closed(
            {
                key: _NULLABLE_STRING
                for key in (
                    "username",
                    "password",
                    "auth",
                    "email",
                    "serveraddress",
                    "identitytoken",
                    "registrytoken",
                )
            }
        ),
        "add_capabilities": _STRING_LIST,
        "drop_capabilities": _STRING_LIST,
        "pod_spec": _ANY_OBJECT_OR_NULL,
        # jupyter-determined's own: run the trials in Jupyter kernels (docs/kernels.md).
        "kernel": {
            **_closed(
                {
                    "spec": _STRING,
                    "gateway": {"type": ["string", "object", "null"]},
                    "keep_alive": {
                        "type": "number",
                        "minimum": 0,
                        "x-minimum-hint": "must be >= 0 seconds (0 shuts a failed kernel down)",
                    },
                }
            ),
            "type": ["object", "null"],
        },
        # The issue's spelling of environment.kernel.gateway (a URL or {url, token}); implies
        # a kernel. The master stores it as environment.kernel.gateway.
        "jupyter_gateway": {"type": ["string", "object", "null"]},
    },
)
ENVIRONMENT_SCHEMA["type"] = ["object", "null"]

RESOURCES_SCHEMA = _closed(
    {
        "slots_per_trial": {
            "type": "integer",
            "minimum": 0,
            "x-minimum-hint": "must be >= 0 (0 runs the trial on CPU only)",
        },
        "max_slots": {"type": ["integer", "null"], "minimum": 0},
        "weight": {"type": "number", "minimum": 0},
        "priority": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 99,
            "x-minimum-hint": "must be between 1 and 99 (smaller is more important)",
            "x-maximum-hint": "must be between 1 and 99 (smaller is more important)",
        },
        "resource_pool": _NULLABLE_STRING,
        "shm_size": {"type": ["integer", "string", "null"]},
        "is_single_node": {"type": ["boolean", "null"]},
        "devices": {"type": "array", "items": {"type": ["string", "object"]}},
        "slots": {"type": "integer", "minimum": 0},
        "native_parallel": _BOOL,
        "agent_label": _NULLABLE_STRING,
    }
)
RESOURCES_SCHEMA["type"] = ["object", "null"]

_BIND_MOUNT = _closed(
    {
        "host_path": _ABSOLUTE_PATH,
        "container_path": {
            "type": "string",
            "minLength": 1,
            "not": {"const": "."},
            "x-not-hint": "must not be '.' (the working directory cannot be replaced)",
        },
        "read_only": _BOOL,
        "propagation": _STRING,
    },
    required=["host_path", "container_path"],
)

OPTIMIZATIONS_SCHEMA = _closed(
    {
        "aggregation_frequency": _POSITIVE_INT,
        "auto_tune_tensor_fusion": _BOOL,
        "average_aggregated_gradients": _BOOL,
        "average_training_metrics": _BOOL,
        "gradient_compression": _BOOL,
        "grad_updates_size_file": _NULLABLE_STRING,
        "mixed_precision": {"enum": ["O0", "O1", "O2", "O3"]},
        "tensor_fusion_cycle_time": {"type": "integer", "minimum": 0},
        "tensor_fusion_threshold": {"type": "integer", "minimum": 0},
    }
)
OPTIMIZATIONS_SCHEMA["type"] = ["object", "null"]

PROFILING_SCHEMA = _closed(
    {
        "enabled": _BOOL,
        "begin_on_batch": _NON_NEGATIVE_INT,
        "end_after_batch": {"type": ["integer", "null"], "minimum": 0},
        "sync_timings": _BOOL,
    }
)
PROFILING_SCHEMA["type"] = ["object", "null"]

_ENTRYPOINT = {
    "type": ["string", "array", "null"],
    "pattern": "\\S",
    "x-pattern-hint": "must not be empty (a shell command or a list of arguments)",
    "minItems": 1,
    "x-min-items-hint": "must not be empty (a shell command or a list of arguments)",
    "items": {"type": "string"},
}

_INTERNAL = {
    "type": ["object", "null"],
    "properties": {
        "native": {
            "type": ["object", "null"],
            "properties": {"command": {"type": "array", "items": {"type": "string"}}},
        }
    },
}

_LOG_POLICY = {
    "type": "object",
    "properties": {
        "name": _NULLABLE_STRING,
        "pattern": _NULLABLE_STRING,
        # 0.38 uses a string; older releases used {type: ...}.
        "action": {"type": ["string", "object", "null"]},
    },
}

TOP_LEVEL_PROPERTIES: dict[str, Any] = {
    "name": {"type": "string", "minLength": 1},
    "description": _NULLABLE_STRING,
    "labels": _STRING_LIST,
    "data": _ANY_OBJECT_OR_NULL,
    "workspace": _NULLABLE_STRING,
    "project": _NULLABLE_STRING,
    "entrypoint": _ENTRYPOINT,
    "hyperparameters": {"$ref": "#/$defs/hyperparameters"},
    "searcher": SEARCHER_SCHEMA,
    "resources": RESOURCES_SCHEMA,
    "checkpoint_storage": CHECKPOINT_STORAGE_SCHEMA,
    "max_restarts": _NON_NEGATIVE_INT,
    "min_validation_period": {"$ref": "#/$defs/length"},
    "min_checkpoint_period": {"$ref": "#/$defs/length"},
    "checkpoint_policy": {"enum": ["best", "all", "none"]},
    "perform_initial_validation": _BOOL,
    "records_per_epoch": _NON_NEGATIVE_INT,
    "scheduling_unit": _POSITIVE_INT,
    "reproducibility": {
        "type": ["object", "null"],
        "properties": {
            "experiment_seed": {
                "type": ["integer", "null"],
                "minimum": 0,
                "exclusiveMaximum": MAX_SEED,
                "x-minimum-hint": f"must be >= 0 and < {MAX_SEED} (2^31)",
                "x-maximum-hint": f"must be >= 0 and < {MAX_SEED} (2^31)",
            }
        },
        "additionalProperties": False,
    },
    "environment": ENVIRONMENT_SCHEMA,
    "bind_mounts": {"type": "array", "items": _BIND_MOUNT},
    "optimizations": OPTIMIZATIONS_SCHEMA,
    "profiling": PROFILING_SCHEMA,
    "debug": _BOOL,
    "log_policies": {"type": ["array", "null"], "items": _LOG_POLICY},
    "retention_policy": {
        "type": ["object", "null"],
        "properties": {
            "log_retention_days": {"type": ["integer", "null"], "minimum": -1, "maximum": 32767}
        },
        "additionalProperties": False,
    },
    "preemption_timeout": {"type": ["integer", "null"], "minimum": 0},
    "integrations": _ANY_OBJECT_OR_NULL,
    "slurm": _ANY_OBJECT_OR_NULL,
    "pbs": _ANY_OBJECT_OR_NULL,
    # Legacy sections: parsed so old configs load, otherwise ignored.
    "tensorboard_storage": _ANY_OBJECT_OR_NULL,
    "security": _ANY_OBJECT_OR_NULL,
    "data_layer": _ANY_OBJECT_OR_NULL,
    "internal": _INTERNAL,
}

_LENGTH_PROPERTIES = {unit: _NON_NEGATIVE_INT for unit in LENGTH_UNITS}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "title": "Experiment config",
    "type": "object",
    "properties": TOP_LEVEL_PROPERTIES,
    "additionalProperties": False,
    "required": ["searcher"],
    "x-required-hints": {
        "searcher": "required (e.g. searcher: {name: single, metric: validation_loss})",
    },
    "$defs": {
        "length": _closed(
            _LENGTH_PROPERTIES, minProperties=1, maxProperties=1, **{"x-kind": "length"}
        ),
        "positive_length": _closed(
            {unit: _POSITIVE_INT for unit in LENGTH_UNITS},
            minProperties=1,
            maxProperties=1,
            **{"x-kind": "length"},
        ),
        # searcher.max_length also takes a bare, unitless integer (Core API scripts).
        "length_or_int": {
            "type": ["integer", "object"],
            "minimum": 0,
            "properties": _LENGTH_PROPERTIES,
            "additionalProperties": False,
            "minProperties": 1,
            "maxProperties": 1,
            "x-kind": "length",
        },
        "hyperparameters": {
            "type": ["object", "null"],
            "additionalProperties": {"$ref": "#/$defs/hyperparameter"},
        },
        "hyperparameter": {
            "if": {"type": "object", "required": ["type"]},
            "then": _TYPED_HPARAM,
            "else": {"if": {"type": "object"}, "then": {"$ref": "#/$defs/hyperparameters"}},
        },
    },
}
