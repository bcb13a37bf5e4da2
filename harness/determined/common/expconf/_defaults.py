"""Expanding a config: every default filled, as the master stores and hands it to trials."""

from __future__ import annotations

import copy
import time
from typing import Any

from determined.common.expconf._hparams import normalize_hparams
from determined.common.expconf._schema import MAX_SEED

DEFAULT_NAME = "Experiment (unnamed)"

_TOP_LEVEL_DEFAULTS: dict[str, Any] = {
    "name": DEFAULT_NAME,
    "description": None,
    "labels": [],
    "data": {},
    "entrypoint": None,
    "max_restarts": 5,
    "min_validation_period": {"batches": 0},
    "min_checkpoint_period": {"batches": 0},
    "scheduling_unit": 100,
    "records_per_epoch": 0,
    "checkpoint_policy": "best",
    "perform_initial_validation": False,
    "bind_mounts": [],
    "debug": False,
}

_SEARCHER_DEFAULTS: dict[str, dict[str, Any]] = {
    "single": {},
    "random": {"max_concurrent_trials": 16},
    "grid": {"max_concurrent_trials": 16},
    "adaptive_asha": {
        "max_concurrent_trials": 16,
        "mode": "standard",
        "divisor": 4,
        "max_rungs": 5,
        "bracket_rungs": [],
        "stop_once": False,
    },
    "async_halving": {"max_concurrent_trials": 16, "divisor": 4, "stop_once": False},
}

_RESOURCES_DEFAULTS = {"slots_per_trial": 1, "max_slots": None, "priority": 42, "weight": 1}
_GC_DEFAULTS = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
_ENVIRONMENT_DEFAULTS = {"environment_variables": [], "force_pull_image": False}
_BIND_MOUNT_DEFAULTS = {"read_only": False, "propagation": "rprivate"}
_OPTIMIZATIONS_DEFAULTS = {
    "aggregation_frequency": 1,
    "auto_tune_tensor_fusion": False,
    "average_aggregated_gradients": True,
    "average_training_metrics": True,
    "gradient_compression": False,
    "grad_updates_size_file": None,
    "mixed_precision": "O0",
    "tensor_fusion_cycle_time": 1,
    "tensor_fusion_threshold": 64,
}
_PROFILING_DEFAULTS = {
    "enabled": False,
    "begin_on_batch": 0,
    "end_after_batch": None,
    "sync_timings": True,
}


def apply_defaults(
    config: dict,
    *,
    default_checkpoint_storage: dict | None = None,
    seed: int | None = None,
) -> dict:
    """Return a NEW config with every default filled; ``config`` is not modified.

    ``default_checkpoint_storage`` (the master's) is merged under the user's section: the user's
    keys win, and when the user names a different storage type only the GC counts carry over.
    ``seed`` is the experiment seed used when the config has none (Determined uses the current
    Unix time, which is also our fallback). Applying defaults twice gives the same result.
    The config should be valid (see validate); fields of the wrong type are left as they are.
    """
    expanded = copy.deepcopy(config)
    _fill(expanded, _TOP_LEVEL_DEFAULTS)
    expanded["hyperparameters"] = normalize_hparams(_mapping(expanded.get("hyperparameters")))

    searcher = _section(expanded, "searcher")
    name = searcher.get("name")
    _fill(
        searcher,
        {
            "smaller_is_better": True,
            **_SEARCHER_DEFAULTS.get(name if isinstance(name, str) else "", {}),
        },
    )

    _fill(_section(expanded, "resources"), _RESOURCES_DEFAULTS)
    expanded["checkpoint_storage"] = _checkpoint_storage(
        _mapping(expanded.get("checkpoint_storage")), default_checkpoint_storage or {}
    )

    reproducibility = _section(expanded, "reproducibility")
    if reproducibility.get("experiment_seed") is None:
        reproducibility["experiment_seed"] = (
            seed if seed is not None else int(time.time()) % MAX_SEED
        )

    _fill(_section(expanded, "environment"), _ENVIRONMENT_DEFAULTS)
    if isinstance(expanded["bind_mounts"], list):
        for mount in expanded["bind_mounts"]:
            if isinstance(mount, dict):
                _fill(mount, _BIND_MOUNT_DEFAULTS)
    _fill(_section(expanded, "optimizations"), _OPTIMIZATIONS_DEFAULTS)
    _fill(_section(expanded, "profiling"), _PROFILING_DEFAULTS)
    return expanded


def _checkpoint_storage(user: dict, default: dict) -> dict:
    user_type, default_type = user.get("type"), default.get("type")
    if user_type is None or default_type is None or user_type == default_type:
        storage = {**copy.deepcopy(default), **user}
    else:
        # A different storage type: the master's paths mean nothing for it, its GC counts do.
        storage = {key: default[key] for key in _GC_DEFAULTS if key in default}
        storage.update(user)
    _fill(storage, _GC_DEFAULTS)
    return storage


def _fill(target: dict, defaults: dict) -> None:
    """Set each default where the key is absent or null (null means "use the default")."""
    for key, value in defaults.items():
        if target.get(key) is None:
            target[key] = copy.deepcopy(value)


def _section(config: dict, key: str) -> dict:
    """The sub-mapping at ``key``, created when absent or null (left alone if mistyped)."""
    value = config.get(key)
    if value is None:
        value = config[key] = {}
    return value if isinstance(value, dict) else {}


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
