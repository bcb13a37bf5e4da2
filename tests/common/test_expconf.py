"""Loading and validating experiment configs: every error reported, each with its path."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from determined.common import expconf

REPO = Path(__file__).resolve().parents[2]

BASE = {
    "name": "exp",
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "x"},
}


def with_(**changes: object) -> dict:
    """BASE with top-level fields replaced (a value of ... deletes the field)."""
    config = {**BASE, **changes}
    return {key: value for key, value in config.items() if value is not ...}


def errors_of(config: dict) -> list[str]:
    return expconf.validate(config)


def assert_one_error(config: dict, expected_fragment: str) -> str:
    errors = errors_of(config)
    assert len(errors) == 1, errors
    assert expected_fragment in errors[0], errors
    return errors[0]


# ------------------------------------------------------------------------------------------
# load / load_file


def test_load_yaml_and_json_give_the_same_dict() -> None:
    from_yaml = expconf.load("name: a\nsearcher:\n  name: single\n  metric: x\n")
    from_json = expconf.load('{"name": "a", "searcher": {"name": "single", "metric": "x"}}')
    assert from_yaml == from_json == {"name": "a", "searcher": {"name": "single", "metric": "x"}}


def test_load_keeps_dates_as_strings_so_configs_stay_json_able() -> None:
    assert expconf.load("description: 2024-01-02\n") == {"description": "2024-01-02"}


def test_malformed_yaml_names_source_line_and_column() -> None:
    text = "name: a\nsearcher:\n  name: single\n   metric: x\n"
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.load(text, source="exp.yaml")
    (error,) = info.value.errors
    assert error.startswith("exp.yaml: line 4, column")
    assert "exp.yaml" in str(info.value)


def test_duplicate_keys_are_an_error_not_silently_dropped() -> None:
    text = "name: a\nsearcher: {name: single, metric: x}\nname: b\n"
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.load(text, source="exp.yaml")
    assert info.value.errors == ["exp.yaml: line 3, column 1: duplicate key 'name'"]


def test_invalid_config_pickles_with_its_errors() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(expconf.InvalidConfig(["a: b", "c: d"])))
    assert error.errors == ["a: b", "c: d"]


def test_malformed_json_names_source_and_line() -> None:
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.load('{"name": "a",\n "searcher": {"name" "single"}\n}', source="exp.json")
    assert info.value.errors == ["exp.json: line 2, column 22: Expecting ':' delimiter"]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("- a\n- b\n", "not a list"),
        ("just a string\n", "not a string"),
        ("", "empty"),
        ("# only\n", "empty"),
    ],
)
def test_load_rejects_documents_that_are_not_mappings(text: str, fragment: str) -> None:
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.load(text, source="cfg.yaml")
    assert info.value.errors[0].startswith("cfg.yaml: ")
    assert fragment in info.value.errors[0]


def test_load_file_reads_and_names_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("name: a\n")
    assert expconf.load_file(path) == {"name": "a"}
    with pytest.raises(expconf.InvalidConfig, match="nope.yaml: config file not found"):
        expconf.load_file(tmp_path / "nope.yaml")
    path.write_text("name: [a\n")
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.load_file(path)
    assert info.value.errors[0].startswith(f"{path}: line ")


def test_invalid_config_is_a_value_error_listing_every_error() -> None:
    error = expconf.InvalidConfig(["a: first", "b.c: second"])
    assert isinstance(error, ValueError)
    assert error.errors == ["a: first", "b.c: second"]
    assert str(error).splitlines()[1:] == ["  a: first", "  b.c: second"]


# ------------------------------------------------------------------------------------------
# invalid configs: one error each, exact path and message


INVALID = [
    pytest.param(
        with_(serarcher={}),
        "serarcher: unknown key 'serarcher' (did you mean 'searcher'?)",
        id="unknown-top-level",
    ),
    pytest.param(
        with_(searcher={"name": "single", "metric": "x", "smaller_is_beter": False}),
        "searcher.smaller_is_beter: unknown key 'smaller_is_beter' (did you mean 'smaller_is_better'?)",
        id="unknown-searcher-key",
    ),
    pytest.param(
        with_(resources={"slots_per_trail": 2}),
        "resources.slots_per_trail: unknown key 'slots_per_trail' (did you mean 'slots_per_trial'?)",
        id="unknown-nested-key",
    ),
    pytest.param(
        with_(searcher={"name": "random", "metric": "x"}),
        "searcher.max_trials: required when searcher.name is 'random'",
        id="random-without-max-trials",
    ),
    pytest.param(
        with_(searcher={"name": "single"}),
        "searcher.metric: required for every searcher",
        id="missing-metric",
    ),
    pytest.param(with_(searcher=...), "searcher: required", id="missing-searcher"),
    pytest.param(
        with_(
            searcher={"name": "grid", "metric": "x"},
            hyperparameters={"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
        ),
        "hyperparameters.lr.count: required when searcher.name is 'grid'",
        id="grid-missing-count",
    ),
    pytest.param(
        with_(
            searcher={"name": "grid", "metric": "x"},
            hyperparameters={
                "opt": {"lr": {"type": "log", "minval": -3, "maxval": -1, "base": 10}},
                "b": 3,
            },
        ),
        "hyperparameters.opt.lr.count: required when searcher.name is 'grid'",
        id="grid-missing-count-nested",
    ),
    pytest.param(
        with_(hyperparameters={"n": {"type": "int", "minval": 8, "maxval": 8}}),
        "hyperparameters.n: minval must be less than maxval (got minval 8, maxval 8)",
        id="minval-equals-maxval",
    ),
    pytest.param(
        with_(hyperparameters={"g": {"lr": {"type": "double", "minval": 1.0, "maxval": 0.5}}}),
        "hyperparameters.g.lr: minval must be less than maxval",
        id="minval-above-maxval-nested",
    ),
    pytest.param(
        with_(hyperparameters={"n": {"type": "int", "minval": 1.5, "maxval": 4}}),
        "hyperparameters.n.minval: expected an integer, got number 1.5",
        id="int-hparam-float-bound",
    ),
    pytest.param(
        with_(max_restarts="three"),
        "max_restarts: expected an integer, got string 'three'",
        id="wrong-type-int",
    ),
    pytest.param(
        with_(debug="yes please"),
        "debug: expected true or false, got string 'yes please'",
        id="wrong-type-bool",
    ),
    pytest.param(
        with_(labels="a"), "labels: expected a list, got string 'a'", id="wrong-type-list"
    ),
    pytest.param(
        with_(max_restarts=-1), "max_restarts: must be >= 0 (got -1)", id="negative-max-restarts"
    ),
    pytest.param(
        with_(resources={"slots_per_trial": -1}),
        "resources.slots_per_trial: must be >= 0 (0 runs the trial on CPU only) (got -1)",
        id="negative-slots",
    ),
    pytest.param(
        with_(resources={"priority": 0}),
        "resources.priority: must be between 1 and 99",
        id="priority-0",
    ),
    pytest.param(
        with_(resources={"priority": 100}),
        "resources.priority: must be between 1 and 99",
        id="priority-100",
    ),
    pytest.param(
        with_(min_validation_period={"batches": 10, "epochs": 1}),
        "min_validation_period: a length needs exactly one of batches, records or epochs "
        "(e.g. {batches: 100}), got batches, epochs",
        id="length-two-units",
    ),
    pytest.param(
        with_(min_checkpoint_period={}),
        "min_checkpoint_period: a length needs exactly one of batches, records or epochs",
        id="length-empty",
    ),
    pytest.param(
        with_(min_checkpoint_period={"batch": 10}),
        "min_checkpoint_period.batch: unknown key 'batch' (did you mean 'batches'?)",
        id="length-unknown-unit",
    ),
    pytest.param(
        with_(min_validation_period=100),
        "min_validation_period: expected a mapping, got integer 100",
        id="length-bare-int-not-allowed-here",
    ),
    pytest.param(
        with_(searcher={"name": "single", "metric": "x", "max_length": {"batches": -5}}),
        "searcher.max_length.batches: must be >= 0 (got -5)",
        id="length-negative",
    ),
    pytest.param(
        with_(hyperparameters={"lr": {"type": "uniform", "minval": 0, "maxval": 1}}),
        "hyperparameters.lr.type: unknown hyperparameter type 'uniform' (expected one of "
        "const, int, double, log, categorical)",
        id="unknown-hparam-type",
    ),
    pytest.param(
        with_(hyperparameters={"act": {"type": "categorical", "vals": []}}),
        "hyperparameters.act.vals: must list at least one value",
        id="categorical-empty",
    ),
    pytest.param(
        with_(hyperparameters={"lr": {"type": "log", "minval": -3, "maxval": -1, "base": 0}}),
        "hyperparameters.lr.base: must be > 0 (got 0)",
        id="log-base-zero",
    ),
    pytest.param(
        with_(hyperparameters={"lr": {"type": "double", "minval": 0, "maxval": 1, "stepsize": 2}}),
        "hyperparameters.lr.stepsize: unknown key 'stepsize'",
        id="hparam-unknown-field",
    ),
    pytest.param(
        with_(checkpoint_storage={"type": "shared_fss", "host_path": "/tmp"}),
        "checkpoint_storage.type: unknown checkpoint storage type 'shared_fss' (expected "
        "shared_fs, directory, s3 or gcs) (did you mean 'shared_fs'?)",
        id="bad-storage-type",
    ),
    pytest.param(
        with_(checkpoint_storage={"type": "s3"}),
        "checkpoint_storage.bucket: required for type s3 (the name of the bucket checkpoints go to)",
        id="s3-without-bucket",
    ),
    pytest.param(
        with_(checkpoint_storage={"type": "s3", "bucket": "b", "prefix": "x/../.."}),
        "checkpoint_storage.prefix: 'x/../..' must not contain '..' path parts",
        id="s3-prefix-climbs",
    ),
    pytest.param(
        with_(checkpoint_storage={"type": "s3", "bucket": "b", "access_key": "k"}),
        "checkpoint_storage.secret_key: required when access_key is given (give both or neither)",
        id="s3-half-credentials",
    ),
    pytest.param(
        with_(checkpoint_storage={"type": "azure", "container": "c"}),
        "checkpoint_storage.type: 'azure' is not supported by master_lite: use s3 (any "
        "S3-compatible store, through endpoint_url), gcs (Google Cloud Storage), shared_fs or "
        "directory",
        id="azure-unsupported",
    ),
    pytest.param(
        with_(checkpoint_storage={"type": "gcs", "prefix": "p"}),
        "checkpoint_storage.bucket: required for type gcs",
        id="gcs-no-bucket",
    ),
    pytest.param(
        with_(checkpoint_storage={"type": "shared_fs", "host_path": "ckpts"}),
        "checkpoint_storage.host_path: must be an absolute path (starting with '/') (got 'ckpts')",
        id="relative-shared-fs-host-path",
    ),
    pytest.param(
        with_(checkpoint_storage={"type": "directory", "container_path": "/x", "host_path": "/y"}),
        "checkpoint_storage.host_path: unknown key 'host_path'",
        id="directory-has-no-host-path",
    ),
    pytest.param(
        with_(bind_mounts=[{"host_path": "data", "container_path": "/data"}]),
        "bind_mounts[0].host_path: must be an absolute path (starting with '/') (got 'data')",
        id="relative-bind-mount",
    ),
    pytest.param(
        with_(bind_mounts=[{"host_path": "/data"}]),
        "bind_mounts[0].container_path: required",
        id="bind-mount-missing-container-path",
    ),
    pytest.param(with_(entrypoint=""), "entrypoint: must not be empty", id="empty-entrypoint"),
    pytest.param(with_(entrypoint="   "), "entrypoint: must not be empty", id="blank-entrypoint"),
    pytest.param(with_(entrypoint=[]), "entrypoint: must not be empty", id="empty-entrypoint-list"),
    pytest.param(
        with_(entrypoint=["python3", 3]),
        "entrypoint[1]: expected a string, got integer 3",
        id="entrypoint-list-item",
    ),
    pytest.param(
        with_(environment={"environment_variables": ["FOO"]}),
        "environment.environment_variables[0]: must look like KEY=VALUE (got 'FOO')",
        id="env-var-without-equals",
    ),
    pytest.param(
        with_(environment={"environment_variables": {"cuda": ["=x"]}}),
        "environment.environment_variables.cuda[0]: must look like KEY=VALUE (got '=x')",
        id="env-var-per-device-form",
    ),
    pytest.param(
        with_(searcher={"name": "radnom", "metric": "x"}),
        "searcher.name: unknown searcher 'radnom' (expected one of single, random, grid, "
        "adaptive_asha, async_halving) (did you mean 'random'?)",
        id="unknown-searcher",
    ),
    pytest.param(
        with_(searcher={"name": "custom", "metric": "x", "unit": "batches"}),
        "searcher.name: 'custom' searchers are not supported",
        id="custom-searcher",
    ),
    pytest.param(
        with_(searcher={"name": "adaptive", "metric": "x", "budget": 10}),
        "searcher.name: 'adaptive' is a legacy searcher that Determined no longer runs; use adaptive_asha instead",
        id="legacy-adaptive",
    ),
    pytest.param(
        with_(searcher={"name": "pbt", "metric": "x"}),
        "searcher.name: 'pbt' is a legacy searcher that Determined no longer runs; use adaptive_asha",
        id="legacy-pbt",
    ),
    pytest.param(
        with_(searcher={"name": "adaptive_asha", "metric": "x", "max_trials": 4}),
        "searcher: adaptive_asha needs time_metric and max_time (e.g. time_metric: "
        "batches, max_time: 100), or max_length",
        id="asha-without-length",
    ),
    pytest.param(
        with_(
            searcher={
                "name": "adaptive_asha",
                "metric": "x",
                "max_trials": 4,
                "time_metric": "batches",
            }
        ),
        "searcher.max_time: required together with searcher.time_metric",
        id="asha-time-metric-without-max-time",
    ),
    pytest.param(
        with_(
            searcher={
                "name": "adaptive_asha",
                "metric": "x",
                "max_trials": 4,
                "max_length": 100,
                "divisor": 1,
            }
        ),
        "searcher.divisor: must be > 1 (got 1)",
        id="asha-divisor-1",
    ),
    pytest.param(
        with_(
            searcher={
                "name": "adaptive_asha",
                "metric": "x",
                "max_trials": 4,
                "max_length": 100,
                "mode": "fast",
            }
        ),
        "searcher.mode: must be one of standard, aggressive, conservative (got 'fast')",
        id="asha-bad-mode",
    ),
    pytest.param(
        with_(
            searcher={
                "name": "async_halving",
                "metric": "x",
                "max_trials": 4,
                "time_metric": "b",
                "max_time": 9,
            }
        ),
        "searcher.num_rungs: required when searcher.name is 'async_halving'",
        id="async-halving-without-num-rungs",
    ),
    pytest.param(
        with_(
            searcher={
                "name": "async_halving",
                "metric": "x",
                "max_trials": 4,
                "num_rungs": 3,
                "max_length": {"batches": 0},
            }
        ),
        "searcher.max_length.batches: must be >= 1 (got 0)",
        id="async-halving-length-positive",
    ),
    pytest.param(
        with_(reproducibility={"experiment_seed": 2**31}),
        "reproducibility.experiment_seed: must be >= 0 and < 2147483648 (2^31) (got 2147483648)",
        id="seed-too-large",
    ),
    pytest.param(
        with_(reproducibility={"experiment_seed": -1}),
        "reproducibility.experiment_seed: must be >= 0",
        id="seed-negative",
    ),
    pytest.param(
        with_(checkpoint_policy="latest"),
        "checkpoint_policy: must be one of best, all, none (got 'latest')",
        id="bad-checkpoint-policy",
    ),
    pytest.param(
        with_(optimizations={"mixed_precision": "O4"}),
        "optimizations.mixed_precision: must be one of O0, O1, O2, O3 (got 'O4')",
        id="bad-mixed-precision",
    ),
    pytest.param(
        with_(profiling={"begin_on_batch": 10, "end_after_batch": 5}),
        "profiling.end_after_batch: must be >= profiling.begin_on_batch (got 5 < 10)",
        id="profiling-range",
    ),
    pytest.param(
        with_(workspace="ws"),
        "project: required when workspace is set",
        id="workspace-without-project",
    ),
    pytest.param(
        with_(scheduling_unit=0), "scheduling_unit: must be >= 1 (got 0)", id="scheduling-unit-0"
    ),
    pytest.param(
        with_(searcher={"name": "random", "metric": "x", "max_trials": 0}),
        "searcher.max_trials: must be >= 1 (got 0)",
        id="max-trials-0",
    ),
    pytest.param(
        with_(hyperparameters={1: 2}),
        "hyperparameters.1: keys must be strings, got integer 1",
        id="non-string-key",
    ),
]


@pytest.mark.parametrize("config, expected", INVALID)
def test_invalid_config_reports_path_and_message(config: dict, expected: str) -> None:
    assert_one_error(config, expected)
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.check(config)
    assert any(expected in error for error in info.value.errors)


def test_several_errors_are_all_reported_sorted() -> None:
    config = {
        "serarcher": {"name": "random"},
        "searcher": {"name": "random"},
        "max_restarts": -2,
        "resources": {"slots_per_trial": "two", "priority": 0},
        "hyperparameters": {"lr": {"type": "double", "minval": 1, "maxval": 0}},
    }
    errors = expconf.validate(config)
    assert errors == sorted(errors)
    expected = [
        "hyperparameters.lr: minval must be less than maxval",
        "max_restarts: must be >= 0",
        "resources.priority: must be between 1 and 99",
        "resources.slots_per_trial: expected an integer, got string 'two'",
        "searcher.max_trials: required when searcher.name is 'random'",
        "searcher.metric: required for every searcher",
        "serarcher: unknown key 'serarcher' (did you mean 'searcher'?)",
    ]
    assert len(errors) == len(expected), errors
    for error, fragment in zip(errors, expected, strict=False):
        assert error.startswith(fragment), (error, fragment)
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.check(config)
    assert info.value.errors == errors
    assert str(info.value).count("\n") == len(errors)


def test_validate_rejects_a_non_mapping() -> None:
    assert expconf.validate(["a"]) == [  # type: ignore[arg-type]
        "<config>: the config must be a mapping of field names to values, not a list"
    ]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(expconf.SCHEMA)
    assert expconf.SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


# ------------------------------------------------------------------------------------------
# valid configs


TUTORIAL = {
    "0_start.yaml": """
        name: core-api-stage-0
        entrypoint: python3 0_start.py
        # metric is required even though it is unused
        searcher:
          name: single
          metric: x
        max_restarts: 0
    """,
    "1_metrics.yaml": """
        name: core-api-stage-1
        entrypoint: python3 1_metrics.py
        searcher: {name: single, metric: x}
        max_restarts: 0
    """,
    "2_checkpoints.yaml": """
        name: core-api-stage-2
        entrypoint: python3 2_checkpoints.py
        searcher: {name: single, metric: x}
        max_restarts: 0
    """,
    "3_hpsearch.yaml": """
        name: core-api-stage-3
        entrypoint: python3 3_hpsearch.py
        hyperparameters:
          increment_by:
            type: int
            minval: 1
            maxval: 8
        searcher:
          name: adaptive_asha
          metric: x
          max_trials: 10
          time_metric: batches
          max_time: 100
        max_restarts: 0
    """,
    "4_distributed.yaml": """
        name: core-api-stage-4
        entrypoint: python3 4_distributed.py launcher
        resources:
          slots_per_trial: 8
        hyperparameters:
          increment_by: {type: int, minval: 1, maxval: 8}
        searcher: {name: single, metric: x}
        max_restarts: 0
    """,
    # <=0.37 forms
    "0_start_037.yaml": """
        name: core-api-stage-0
        entrypoint: ./0_start.py
        searcher: {name: single, metric: x, max_length: 1}
        max_restarts: 0
    """,
    "3_hpsearch_037.yaml": """
        name: core-api-stage-3
        entrypoint: python3 3_hpsearch.py
        hyperparameters:
          increment_by: {type: int, minval: 1, maxval: 8}
        searcher:
          name: adaptive_asha
          metric: x
          max_trials: 10
          max_length: 100
        max_restarts: 0
    """,
    "4_distributed_037.yaml": """
        name: core-api-stage-4
        entrypoint: python3 4_distributed.py launcher
        resources: {slots_per_trial: 8}
        hyperparameters: {increment_by: {type: int, minval: 1, maxval: 8}}
        searcher: {name: single, metric: x, max_length: {batches: 100}}
        max_restarts: 0
    """,
}


@pytest.mark.parametrize("filename", sorted(TUTORIAL))
def test_tutorial_configs_validate(filename: str) -> None:
    config = expconf.load(textwrap.dedent(TUTORIAL[filename]), source=filename)
    assert expconf.validate(config) == []
    expanded = expconf.apply_defaults(config, seed=1)
    assert expconf.validate(expanded) == []


FULL_CONFIG = """
name: mnist
description: a full config
labels: [a, b]
data: {url: "https://example.invalid/mnist.tgz", secrets: {token: abc}}
workspace: ws
project: proj
entrypoint: [python3, train.py, --fast]
hyperparameters:
  global_batch_size: 64
  lr: {type: log, minval: -4, maxval: -1, base: 10, count: 3}
  dropout: {type: double, minval: 0.1, maxval: 0.5, count: 2}
  layers: {type: int, minval: 1, maxval: 3, count: 3}
  act: {type: categorical, vals: [relu, tanh]}
  opt:
    name: {type: const, val: adam}
    betas: [0.9, 0.999]
    inner: {momentum: {type: double, minval: 0.0, maxval: 0.9, count: 2}}
  empty_group: {}
searcher:
  name: grid
  metric: validation_loss
  smaller_is_better: true
  max_concurrent_trials: 4
  max_length: {epochs: 2}
  source_trial_id: null
resources: {slots_per_trial: 0, max_slots: 4, priority: 10, weight: 2, resource_pool: default, shm_size: 4G}
checkpoint_storage:
  type: shared_fs
  host_path: /tmp/ckpts
  storage_path: determined-checkpoint
  save_experiment_best: 2
  save_trial_best: 1
  save_trial_latest: 0
max_restarts: 2
min_validation_period: {batches: 100}
min_checkpoint_period: {epochs: 1}
checkpoint_policy: all
perform_initial_validation: true
records_per_epoch: 60000
scheduling_unit: 50
reproducibility: {experiment_seed: 2147483647}
environment:
  image: {cpu: "determinedai/env:cpu", cuda: "determinedai/env:cuda"}
  environment_variables: {cpu: [OMP_NUM_THREADS=1], cuda: [NCCL_DEBUG=INFO, "EMPTY="]}
  force_pull_image: false
  ports: {tb: 6006}
bind_mounts:
  - {host_path: /data, container_path: /data, read_only: true}
optimizations: {aggregation_frequency: 2, mixed_precision: O1}
profiling: {enabled: true, begin_on_batch: 1, end_after_batch: 10}
debug: true
log_policies:
  - {name: CUDA OOM, pattern: ".*CUDA out of memory.*", action: cancel_retries}
retention_policy: {log_retention_days: 30}
preemption_timeout: 3600
integrations: {webhooks: {}}
slurm: {sbatch_args: [--time=1:00:00]}
pbs: {}
tensorboard_storage: null
security: {kerberos: {config_file: /etc/krb5.conf}}
data_layer: {type: shared_fs}
internal: {native: {command: [python3, script.py]}}
"""


def test_a_config_using_every_section_validates() -> None:
    config = expconf.load(FULL_CONFIG)
    assert expconf.validate(config) == []
    assert expconf.validate(expconf.apply_defaults(config)) == []


@pytest.mark.parametrize(
    "searcher",
    [
        {"name": "single", "metric": "x"},
        {"name": "random", "metric": "x", "max_trials": 3, "max_concurrent_trials": 0},
        {"name": "grid", "metric": "x"},
        {
            "name": "adaptive_asha",
            "metric": "x",
            "max_trials": 8,
            "time_metric": "batches",
            "max_time": 100,
            "mode": "aggressive",
            "bracket_rungs": [2, 3],
            "stop_once": True,
        },
        {
            "name": "async_halving",
            "metric": "x",
            "max_trials": 8,
            "num_rungs": 3,
            "max_length": {"batches": 100},
        },
        {
            "name": "async_halving",
            "metric": "x",
            "max_trials": 8,
            "num_rungs": 3,
            "time_metric": "t",
            "max_time": 9,
        },
    ],
    ids=lambda s: s["name"],
)
def test_every_supported_searcher_validates(searcher: dict) -> None:
    assert expconf.validate(with_(searcher=searcher)) == []


def test_native_api_config_without_entrypoint_validates() -> None:
    config = {
        "searcher": {"name": "single", "metric": "x"},
        "internal": {"native": {"command": ["script.py"]}},
    }
    assert expconf.validate(config) == []


def test_import_does_not_load_jsonschema() -> None:
    code = (
        "import sys, determined.common.expconf as e;"
        "assert 'jsonschema' not in sys.modules, 'jsonschema imported eagerly';"
        "e.validate({'searcher': {'name': 'single', 'metric': 'x'}});"
        "assert 'jsonschema' in sys.modules"
    )
    env = {"PYTHONPATH": f"{REPO / 'harness'}:{REPO}"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
