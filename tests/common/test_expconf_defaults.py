"""apply_defaults, apply_overrides, warnings and the small config helpers."""

from __future__ import annotations

import copy
import time

import pytest

from determined.common import expconf

MASTER_STORAGE = {"type": "shared_fs", "host_path": "/root/checkpoints", "storage_path": "."}


def minimal(**searcher: object) -> dict:
    return {
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "x", **searcher},
    }


def test_minimal_config_expands_to_every_default() -> None:
    expanded = expconf.apply_defaults(minimal(), default_checkpoint_storage=MASTER_STORAGE, seed=7)
    assert expanded == {
        "name": "Experiment (unnamed)",
        "description": None,
        "labels": [],
        "data": {},
        "entrypoint": "python3 train.py",
        "hyperparameters": {},
        "searcher": {"name": "single", "metric": "x", "smaller_is_better": True},
        "resources": {"slots_per_trial": 1, "max_slots": None, "priority": 42, "weight": 1},
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": "/root/checkpoints",
            "storage_path": ".",
            "save_experiment_best": 0,
            "save_trial_best": 1,
            "save_trial_latest": 1,
        },
        "max_restarts": 5,
        "min_validation_period": {"batches": 0},
        "min_checkpoint_period": {"batches": 0},
        "scheduling_unit": 100,
        "records_per_epoch": 0,
        "checkpoint_policy": "best",
        "perform_initial_validation": False,
        "reproducibility": {"experiment_seed": 7},
        "environment": {"environment_variables": [], "force_pull_image": False},
        "bind_mounts": [],
        "optimizations": {
            "aggregation_frequency": 1,
            "auto_tune_tensor_fusion": False,
            "average_aggregated_gradients": True,
            "average_training_metrics": True,
            "gradient_compression": False,
            "grad_updates_size_file": None,
            "mixed_precision": "O0",
            "tensor_fusion_cycle_time": 1,
            "tensor_fusion_threshold": 64,
        },
        "profiling": {
            "enabled": False,
            "begin_on_batch": 0,
            "end_after_batch": None,
            "sync_timings": True,
        },
        "debug": False,
    }
    assert expconf.validate(expanded) == []


@pytest.mark.parametrize(
    "searcher, filled",
    [
        ({"name": "random", "max_trials": 3}, {"max_concurrent_trials": 16}),
        ({"name": "grid"}, {"max_concurrent_trials": 16}),
        (
            {"name": "adaptive_asha", "max_trials": 3, "time_metric": "batches", "max_time": 10},
            {
                "max_concurrent_trials": 16,
                "mode": "standard",
                "divisor": 4,
                "max_rungs": 5,
                "bracket_rungs": [],
                "stop_once": False,
            },
        ),
        (
            {
                "name": "async_halving",
                "max_trials": 3,
                "num_rungs": 2,
                "max_length": {"batches": 10},
            },
            {"max_concurrent_trials": 16, "divisor": 4, "stop_once": False},
        ),
        ({"name": "single", "max_length": {"batches": 5}}, {}),
    ],
    ids=lambda value: value.get("name", "") if isinstance(value, dict) else "",
)
def test_searcher_defaults_per_name(searcher: dict, filled: dict) -> None:
    config = {"searcher": {"metric": "x", **searcher}}
    expanded = expconf.apply_defaults(config, seed=1)
    assert expanded["searcher"] == {**config["searcher"], "smaller_is_better": True, **filled}
    assert expconf.validate(expanded) == []


def test_user_values_win_over_defaults() -> None:
    config = minimal(smaller_is_better=False)
    config.update(max_restarts=0, resources={"slots_per_trial": 0, "priority": 3}, name="mine")
    expanded = expconf.apply_defaults(config, seed=1)
    assert expanded["max_restarts"] == 0
    assert expanded["name"] == "mine"
    assert expanded["searcher"]["smaller_is_better"] is False
    assert expanded["resources"] == {
        "slots_per_trial": 0,
        "priority": 3,
        "max_slots": None,
        "weight": 1,
    }


def test_null_sections_are_filled_like_absent_ones() -> None:
    config = {
        **minimal(),
        "resources": None,
        "hyperparameters": None,
        "reproducibility": {"experiment_seed": None},
    }
    expanded = expconf.apply_defaults(config, seed=5)
    assert expanded["resources"]["slots_per_trial"] == 1
    assert expanded["hyperparameters"] == {}
    assert expanded["reproducibility"] == {"experiment_seed": 5}


def test_apply_defaults_does_not_mutate_and_is_idempotent() -> None:
    config = {
        **minimal(),
        "hyperparameters": {
            "a": 1,
            "g": {"b": [1, 2], "c": {"type": "int", "minval": 0, "maxval": 3}},
        },
        "bind_mounts": [{"host_path": "/d", "container_path": "/d"}],
        "checkpoint_storage": {"storage_path": "sub"},
    }
    original = copy.deepcopy(config)
    once = expconf.apply_defaults(config, default_checkpoint_storage=MASTER_STORAGE)
    assert config == original
    twice = expconf.apply_defaults(once, default_checkpoint_storage=MASTER_STORAGE)
    assert twice == once
    assert twice is not once
    once["hyperparameters"]["g"]["b"]["val"].append(3)
    assert config["hyperparameters"]["g"]["b"] == [1, 2], "output must not share objects with input"


def test_hyperparameters_are_normalised_to_typed_leaves() -> None:
    config = {
        **minimal(),
        "hyperparameters": {
            "global_batch_size": 32,
            "act": "relu",
            "layers": [1, 2],
            "nothing": None,
            "lr": {"type": "double", "minval": 0.1, "maxval": 1.0},
            "opt": {"name": "adam", "inner": {"m": {"type": "const", "val": 0.9}}},
            "empty": {},
        },
    }
    expanded = expconf.apply_defaults(config, seed=1)
    assert expanded["hyperparameters"] == {
        "global_batch_size": {"type": "const", "val": 32},
        "act": {"type": "const", "val": "relu"},
        "layers": {"type": "const", "val": [1, 2]},
        "nothing": {"type": "const", "val": None},
        "lr": {"type": "double", "minval": 0.1, "maxval": 1.0},
        "opt": {
            "name": {"type": "const", "val": "adam"},
            "inner": {"m": {"type": "const", "val": 0.9}},
        },
        "empty": {},
    }
    assert expconf.validate(expanded) == []


def test_hparam_leaves_are_sorted_paths_with_typed_specs() -> None:
    hparams = {
        "z": 1,
        "opt": {"lr": {"type": "log", "minval": -3, "maxval": -1, "base": 10}, "b": "x"},
        "a": {"type": "categorical", "vals": [1, 2]},
        "empty": {},
    }
    assert expconf.hparam_leaves(hparams) == [
        (("a",), {"type": "categorical", "vals": [1, 2]}),
        (("empty",), {"type": "const", "val": {}}),
        (("opt", "b"), {"type": "const", "val": "x"}),
        (("opt", "lr"), {"type": "log", "minval": -3, "maxval": -1, "base": 10}),
        (("z",), {"type": "const", "val": 1}),
    ]
    assert expconf.hparam_leaves(expconf.normalize_hparams(hparams)) == expconf.hparam_leaves(
        hparams
    )
    assert expconf.hparam_leaves({}) == []


def test_default_checkpoint_storage_is_merged_under_the_users() -> None:
    config = {**minimal(), "checkpoint_storage": {"storage_path": "mine", "save_trial_best": 3}}
    storage = expconf.apply_defaults(config, default_checkpoint_storage=MASTER_STORAGE, seed=1)[
        "checkpoint_storage"
    ]
    assert storage == {
        "type": "shared_fs",
        "host_path": "/root/checkpoints",
        "storage_path": "mine",
        "save_experiment_best": 0,
        "save_trial_best": 3,
        "save_trial_latest": 1,
    }


def test_a_different_storage_type_does_not_inherit_the_masters_paths() -> None:
    config = {**minimal(), "checkpoint_storage": {"type": "directory", "container_path": "/ckpt"}}
    default = {**MASTER_STORAGE, "save_experiment_best": 2}
    storage = expconf.apply_defaults(config, default_checkpoint_storage=default, seed=1)[
        "checkpoint_storage"
    ]
    assert storage == {
        "type": "directory",
        "container_path": "/ckpt",
        "save_experiment_best": 2,
        "save_trial_best": 1,
        "save_trial_latest": 1,
    }
    assert expconf.validate({**config, "checkpoint_storage": storage}) == []


def test_seed_defaults_to_the_current_unix_time() -> None:
    before = int(time.time())
    seed = expconf.apply_defaults(minimal())["reproducibility"]["experiment_seed"]
    assert before <= seed <= int(time.time())
    assert expconf.apply_defaults(minimal(), seed=11)["reproducibility"]["experiment_seed"] == 11
    pinned = {**minimal(), "reproducibility": {"experiment_seed": 3}}
    assert expconf.apply_defaults(pinned, seed=11)["reproducibility"]["experiment_seed"] == 3


def test_bind_mount_defaults() -> None:
    config = {**minimal(), "bind_mounts": [{"host_path": "/a", "container_path": "/b"}]}
    assert expconf.apply_defaults(config, seed=1)["bind_mounts"] == [
        {"host_path": "/a", "container_path": "/b", "read_only": False, "propagation": "rprivate"}
    ]


# ------------------------------------------------------------------------------------------
# overrides


def test_overrides_set_values_parsed_as_yaml() -> None:
    config = {
        "searcher": {"name": "random", "metric": "x", "max_trials": 2},
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
    }
    original = copy.deepcopy(config)
    updated = expconf.apply_overrides(
        config,
        [
            "searcher.max_trials=8",
            "hyperparameters.lr.maxval=0.5",
            "resources.slots_per_trial=0",
            "description=two words = fine",
            "labels=[a, b]",
            'name="8"',
            "data.nested.deep=true",
            "searcher.max_trials=9",
        ],
    )
    assert config == original
    assert updated["searcher"]["max_trials"] == 9
    assert updated["hyperparameters"]["lr"]["maxval"] == 0.5
    assert updated["resources"] == {"slots_per_trial": 0}
    assert updated["description"] == "two words = fine"
    assert updated["labels"] == ["a", "b"]
    assert updated["name"] == "8"
    assert updated["data"] == {"nested": {"deep": True}}


def test_overrides_can_index_lists_and_set_null() -> None:
    config = {"bind_mounts": [{"host_path": "/a", "container_path": "/b"}], "description": "x"}
    updated = expconf.apply_overrides(config, ["bind_mounts.0.read_only=true", "description="])
    assert updated["bind_mounts"][0]["read_only"] is True
    assert updated["description"] is None


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("abc", "'abc' must look like dotted.path=value"),
        ("=3", "'=3' must look like dotted.path=value"),
        ("a..b=3", "'a..b=3' must look like dotted.path=value"),
        ("searcher.max_trials.x=1", "searcher.max_trials is not a mapping"),
        ("bind_mounts.5.read_only=true", "bind_mounts.5 is not an index of a list of 1 item(s)"),
        ("name=[unclosed", "cannot parse the value"),
    ],
)
def test_bad_overrides_raise_value_error_naming_them(override: str, fragment: str) -> None:
    config = {"searcher": {"max_trials": 2}, "bind_mounts": [{}]}
    with pytest.raises(ValueError) as info:
        expconf.apply_overrides(config, [override])
    assert fragment in str(info.value)


# ------------------------------------------------------------------------------------------
# warnings and helpers


def test_warnings_name_fields_the_local_runner_ignores() -> None:
    config = {
        **minimal(),
        "bind_mounts": [{"host_path": "/a", "container_path": "/b"}],
        "environment": {"image": "pytorch:latest", "environment_variables": ["A=1"]},
        "resources": {"resource_pool": "gpu-pool", "slots_per_trial": 1},
    }
    config["resources"]["shm_size"] = "1G"
    config["environment"]["registry_auth"] = {"username": "me"}
    # environment.image runs trials in containers, which use bind_mounts, shm_size and the
    # registry's credentials.
    # resources.resource_pool is used (resource pools, docs/scheduling.md): no warning.
    notes = expconf.warnings(config)
    assert [note.split(":")[0] for note in notes] == []
    del config["environment"]["image"]
    notes = expconf.warnings(config)
    assert [note.split(":")[0] for note in notes] == [
        "bind_mounts",
        "environment.registry_auth",
        "resources.shm_size",
    ]
    assert "ignored without environment.image" in notes[0]
    assert notes == sorted(notes)
    assert expconf.warnings(minimal()) == []
    assert expconf.warnings(expconf.apply_defaults(minimal(), seed=1)) == []


def test_length_of() -> None:
    assert expconf.length_of({"batches": 5}) == ("batches", 5)
    assert expconf.length_of({"epochs": 2}) == ("epochs", 2)
    assert expconf.length_of(7) == (None, 7)
    for bad in ({"batches": 1, "epochs": 1}, {"steps": 3}, True, "5", {"batches": "5"}):
        with pytest.raises(ValueError, match="a length must be"):
            expconf.length_of(bad)  # type: ignore[arg-type]


def test_environment_variables_from_both_forms() -> None:
    listed = {"environment": {"environment_variables": ["A=1", "B=x=y", "EMPTY="]}}
    assert expconf.environment_variables(listed) == {"A": "1", "B": "x=y", "EMPTY": ""}
    assert expconf.environment_variables(listed, gpu=True) == {"A": "1", "B": "x=y", "EMPTY": ""}
    per_device = {"environment": {"environment_variables": {"cpu": ["C=1"], "cuda": ["G=1"]}}}
    assert expconf.environment_variables(per_device) == {"C": "1"}
    assert expconf.environment_variables(per_device, gpu=True) == {"G": "1"}
    legacy_gpu = {"environment": {"environment_variables": {"gpu": ["L=1"]}}}
    assert expconf.environment_variables(legacy_gpu, gpu=True) == {"L": "1"}
    assert expconf.environment_variables({}) == {}
    with pytest.raises(ValueError, match="'NOPE' must look like KEY=VALUE"):
        expconf.environment_variables({"environment": {"environment_variables": ["NOPE"]}})


@pytest.mark.parametrize(
    "entrypoint, legacy",
    [
        ("model_def:MyTrial", True),
        ("pkg.model_def:MyTrial", True),
        ("python3 train.py", False),
        ("python3 -m x:y", False),
        (["model_def:MyTrial"], False),
        ("model_def:", False),
    ],
)
def test_is_legacy_trial_entrypoint(entrypoint: object, legacy: bool) -> None:
    assert expconf.is_legacy_trial_entrypoint(entrypoint) is legacy


def test_searcher_metric() -> None:
    assert expconf.searcher_metric(minimal()) == "x"
    assert expconf.searcher_metric({}) is None
