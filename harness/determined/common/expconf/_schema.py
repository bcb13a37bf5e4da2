"""The experiment config's JSON schema (draft 2020-12), kept as a plain dict.

The schema covers structure: types, ranges, closed objects, required keys per searcher.
Checks that read across fields (minval < maxval, grid counts, ASHA's two forms, storage types
master_lite cannot use) live in `_validate.py`.

Keys starting with ``x-`` are ours: jsonschema ignores unknown keywords, and `_validate.py` reads
them to turn raw jsonschema errors into messages that tell the user what to write instead.
"""

from __future__ import annotations

from typing import Any

from determined.common.expconf._schema_search import HPARAM_TYPES as HPARAM_TYPES
from determined.common.expconf._schema_search import SEARCHER_NAMES as SEARCHER_NAMES
from determined.common.expconf._schema_search import SEARCHER_SCHEMA, TYPED_HPARAM
from determined.common.expconf._schema_types import (
    ABSOLUTE_PATH,
    ANY_OBJECT_OR_NULL,
    BOOL,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    STRING,
    STRING_LIST,
    closed,
)

SCHEMA_ID = "https://jupyter-determined.invalid/schemas/expconf/v0/experiment.json"

MAX_SEED = 2**31  # exclusive; Determined draws seeds in [0, 2^31)

CHECKPOINT_STORAGE_TYPES = ("shared_fs", "directory", "s3", "gcs", "azure")
LENGTH_UNITS = ("batches", "records", "epochs")


# ---------------------------------------------------------------------------------------------
# checkpoint_storage

_STORAGE_COMMON: dict[str, Any] = {
    "type": STRING,
    "save_experiment_best": NON_NEGATIVE_INT,
    "save_trial_best": NON_NEGATIVE_INT,
    "save_trial_latest": NON_NEGATIVE_INT,
}
_NULLABLE_STRING = {"type": ["string", "null"]}
_SHARED_FS_FIELDS: dict[str, Any] = {
    "host_path": ABSOLUTE_PATH,
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


CHECKPOINT_STORAGE_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {"type": {"type": "string"}},
    "allOf": [
        {
            "if": {"type": "object", "properties": {"type": {"const": kind}}, "required": ["type"]},
            "then": closed({**_STORAGE_COMMON, **fields}),
        }
        for kind, fields in _STORAGE_VARIANTS.items()
    ]
    + [
        # Without a type the section is merged over the master's default (shared_fs).
        {
            "if": {"type": "object", "not": {"required": ["type"]}},
            "then": closed({**_STORAGE_COMMON, **_SHARED_FS_FIELDS}),
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
ENVIRONMENT_SCHEMA = closed(
    {
        "image": {
            "type": ["string", "object", "null"],
            "properties": {key: STRING for key in ("cpu", "cuda", "rocm", "gpu")},
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
            "items": closed(
                {
                    "proxy_port": {"type": "integer"},
                    "proxy_tcp": BOOL,
                    "unauthenticated": BOOL,
                    "default_service_id": BOOL,
                },
                required=["proxy_port"],
            ),
        },
        "force_pull_image": BOOL,
        "registry_auth": closed(
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
        "add_capabilities": STRING_LIST,
        "drop_capabilities": STRING_LIST,
        "pod_spec": ANY_OBJECT_OR_NULL,
        # jupyter-determined's own: run the trials in Jupyter kernels (docs/kernels.md).
        "kernel": {
            **closed(
                {
                    "spec": STRING,
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

RESOURCES_SCHEMA = closed(
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
        "native_parallel": BOOL,
        "agent_label": _NULLABLE_STRING,
    }
)
RESOURCES_SCHEMA["type"] = ["object", "null"]

_BIND_MOUNT = closed(
    {
        "host_path": ABSOLUTE_PATH,
        "container_path": {
            "type": "string",
            "minLength": 1,
            "not": {"const": "."},
            "x-not-hint": "must not be '.' (the working directory cannot be replaced)",
        },
        "read_only": BOOL,
        "propagation": STRING,
    },
    required=["host_path", "container_path"],
)

OPTIMIZATIONS_SCHEMA = closed(
    {
        "aggregation_frequency": POSITIVE_INT,
        "auto_tune_tensor_fusion": BOOL,
        "average_aggregated_gradients": BOOL,
        "average_training_metrics": BOOL,
        "gradient_compression": BOOL,
        "grad_updates_size_file": _NULLABLE_STRING,
        "mixed_precision": {"enum": ["O0", "O1", "O2", "O3"]},
        "tensor_fusion_cycle_time": {"type": "integer", "minimum": 0},
        "tensor_fusion_threshold": {"type": "integer", "minimum": 0},
    }
)
OPTIMIZATIONS_SCHEMA["type"] = ["object", "null"]

PROFILING_SCHEMA = closed(
    {
        "enabled": BOOL,
        "begin_on_batch": NON_NEGATIVE_INT,
        "end_after_batch": {"type": ["integer", "null"], "minimum": 0},
        "sync_timings": BOOL,
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
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}},
                # The Native API (or Trial class) that submitted it: what it needs is checked
                # at submission (determined.common.trial_checks).
                "api": {"type": ["string", "null"]},
            },
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
    "labels": STRING_LIST,
    "data": ANY_OBJECT_OR_NULL,
    "workspace": _NULLABLE_STRING,
    "project": _NULLABLE_STRING,
    "entrypoint": _ENTRYPOINT,
    "hyperparameters": {"$ref": "#/$defs/hyperparameters"},
    "searcher": SEARCHER_SCHEMA,
    "resources": RESOURCES_SCHEMA,
    "checkpoint_storage": CHECKPOINT_STORAGE_SCHEMA,
    "max_restarts": NON_NEGATIVE_INT,
    "min_validation_period": {"$ref": "#/$defs/length"},
    "min_checkpoint_period": {"$ref": "#/$defs/length"},
    "checkpoint_policy": {"enum": ["best", "all", "none"]},
    "perform_initial_validation": BOOL,
    "records_per_epoch": NON_NEGATIVE_INT,
    "scheduling_unit": POSITIVE_INT,
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
    "debug": BOOL,
    "log_policies": {"type": ["array", "null"], "items": _LOG_POLICY},
    "retention_policy": {
        "type": ["object", "null"],
        "properties": {
            "log_retention_days": {"type": ["integer", "null"], "minimum": -1, "maximum": 32767}
        },
        "additionalProperties": False,
    },
    "preemption_timeout": {"type": ["integer", "null"], "minimum": 0},
    "integrations": ANY_OBJECT_OR_NULL,
    "slurm": ANY_OBJECT_OR_NULL,
    "pbs": ANY_OBJECT_OR_NULL,
    # Legacy sections: parsed so old configs load, otherwise ignored.
    "tensorboard_storage": ANY_OBJECT_OR_NULL,
    "security": ANY_OBJECT_OR_NULL,
    "data_layer": ANY_OBJECT_OR_NULL,
    "internal": _INTERNAL,
}

_LENGTH_PROPERTIES = {unit: NON_NEGATIVE_INT for unit in LENGTH_UNITS}

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
        "length": closed(
            _LENGTH_PROPERTIES, minProperties=1, maxProperties=1, **{"x-kind": "length"}
        ),
        "positive_length": closed(
            {unit: POSITIVE_INT for unit in LENGTH_UNITS},
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
            "then": TYPED_HPARAM,
            "else": {"if": {"type": "object"}, "then": {"$ref": "#/$defs/hyperparameters"}},
        },
    },
}
