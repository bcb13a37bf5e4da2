"""Determined's test mode (`det e create --test`, `%%det_submit --test`, Native `test=True`):
the config that trains one trial for one batch, validates and checkpoints it."""

from __future__ import annotations

import copy
import random
from typing import Any

from determined.common.expconf._hparams import hparam_leaves


def sample_hparam_specs(hparams: dict, rng: random.Random) -> dict:
    """One random sample of a hyperparameter section, as nested `{type: const}` specs."""
    sampled: dict = {}
    for path, spec in hparam_leaves(hparams):
        kind = spec.get("type")
        if kind == "int":
            value: Any = rng.randint(int(spec["minval"]), int(spec["maxval"]))
        elif kind == "double":
            value = rng.uniform(float(spec["minval"]), float(spec["maxval"]))
        elif kind == "log":
            value = float(spec.get("base", 10.0)) ** rng.uniform(
                float(spec["minval"]), float(spec["maxval"])
            )
        elif kind == "categorical":
            value = rng.choice(list(spec["vals"]))
        else:
            value = spec.get("val")
        node = sampled
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = {"type": "const", "val": value}
    return sampled


def test_mode_config(config: dict, rng: random.Random | None = None) -> dict:
    """The config `--test` submits (Determined's test mode): one trial, one batch, no GC."""
    test = copy.deepcopy(config)
    test["description"] = "[test-mode] " + str(test.get("description") or test.get("name") or "")
    test["scheduling_unit"] = 1
    test["min_validation_period"] = {"batches": 1}
    storage = dict(test.get("checkpoint_storage") or {})
    for key in ("save_experiment_best", "save_trial_best", "save_trial_latest"):
        storage[key] = 0
    test["checkpoint_storage"] = storage
    searcher = test.get("searcher") or {}
    test["searcher"] = {
        "name": "single",
        "metric": searcher.get("metric"),
        "smaller_is_better": searcher.get("smaller_is_better", True),
        "max_length": {"batches": 1},
    }
    test["hyperparameters"] = sample_hparam_specs(
        test.get("hyperparameters") or {}, rng or random.Random()
    )
    test["max_restarts"] = 0
    return test
