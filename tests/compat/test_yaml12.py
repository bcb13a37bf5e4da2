"""Configs are read as YAML 1.2, as Determined's CLI reads them (ruamel.yaml, safe mode).

Determined's example configs write `learning_rate: 1e-3`; YAML 1.1 (PyYAML) reads that as the
string "1e-3" and a trial that casts it to a tensor dies. Every place a config is read (the
config loader the CLI, the SDK, the Native API and the harness use; `--config` overrides; the
master; the `%%det_submit` magic) must give the same YAML 1.2 values.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from determined.common import expconf

# Every literal form Determined's configs use, and what YAML 1.2 makes of it.
LITERALS: list[tuple[str, object]] = [
    ("1e-3", 0.001),
    ("1.0e-4", 0.0001),
    ("5E-5", 5e-05),
    ("1.5E+3", 1500.0),
    ("1e5", 100000.0),
    ("6.02e23", 6.02e23),
    (".5", 0.5),
    ("-.25", -0.25),
    ("0.001", 0.001),
    ("32", 32),
    ("-4", -4),
    ("+12", 12),
    ("0x1F", 31),
    ("0o17", 15),
    ("true", True),
    ("false", False),
    ("True", True),
    ("FALSE", False),
    # YAML 1.2: yes/no/on/off are plain strings, not booleans.
    ("yes", "yes"),
    ("no", "no"),
    ("on", "on"),
    ("off", "off"),
    ("~", None),
    ("null", None),
    ("", None),
    # Dates stay the text they were written as: a loaded config is always JSON-able.
    ("2024-01-02", "2024-01-02"),
    ("2024-01-02T10:00:00Z", "2024-01-02T10:00:00Z"),
    ("determinedai/tensorflow-ngc:0.38.1", "determinedai/tensorflow-ngc:0.38.1"),
    ('"1e-3"', "1e-3"),
    ("'32'", "32"),
]


@pytest.mark.parametrize("literal, expected", LITERALS, ids=[lit or "empty" for lit, _ in LITERALS])
def test_every_literal_form_reads_as_yaml_1_2(literal: str, expected: object) -> None:
    config = expconf.load(f"hyperparameters:\n  value: {literal}\n")
    value = config["hyperparameters"]["value"]
    assert value == expected and type(value) is type(expected), (literal, value)


def test_special_floats_and_json_equivalence() -> None:
    config = expconf.load("a: .inf\nb: -.Inf\nc: .nan\n")
    assert config["a"] == math.inf and config["b"] == -math.inf and math.isnan(config["c"])
    text = "lr: 1e-3\nflags: [yes, no]\nnested: {x: .5}\n"
    assert expconf.load(text) == json.loads(
        '{"lr": 0.001, "flags": ["yes", "no"], "nested": {"x": 0.5}}'
    )


def test_loaded_configs_are_plain_dicts_and_lists() -> None:
    config = expconf.load("a:\n  b: [1, {c: 2}]\n")
    assert type(config) is dict and type(config["a"]) is dict
    assert type(config["a"]["b"]) is list and type(config["a"]["b"][1]) is dict


DETERMINED_CONFIG = """\
name: mnist_estimator_const
hyperparameters:
  learning_rate: 1e-3
  global_batch_size: 64
  hidden_layer_1: 2500
  dropout: .5
  weight_decay: 1.0e-4
searcher:
  name: single
  metric: accuracy
  smaller_is_better: false
  max_length:
    batches: 100
entrypoint: model_def:MNistTrial
"""


def _assert_determined_values(config: dict) -> None:
    hps = config["hyperparameters"]
    assert hps["learning_rate"] == 0.001 and isinstance(hps["learning_rate"], float)
    assert hps["dropout"] == 0.5 and hps["weight_decay"] == 0.0001
    assert hps["global_batch_size"] == 64


def test_config_files_read_by_the_cli_sdk_and_harness(tmp_path: Path) -> None:
    path = tmp_path / "const.yaml"
    path.write_text(DETERMINED_CONFIG)
    _assert_determined_values(expconf.load_file(path))


def test_overrides_parse_values_as_yaml_1_2() -> None:
    config = expconf.apply_overrides(
        {"hyperparameters": {}},
        ["hyperparameters.lr=1e-3", "hyperparameters.flag=yes", "hyperparameters.o=0o10"],
    )
    assert config["hyperparameters"] == {"lr": 0.001, "flag": "yes", "o": 8}


def test_native_api_reads_yaml_1_2(tmp_path: Path) -> None:
    from determined.experimental._native import load_config

    _assert_determined_values(load_config(DETERMINED_CONFIG))
    path = tmp_path / "const.yaml"
    path.write_text(DETERMINED_CONFIG)
    _assert_determined_values(load_config(str(path)))


def test_the_master_reads_submitted_config_text_as_yaml_1_2(tmp_path: Path) -> None:
    # The CLI and the SDK send the file's text; the master parses it.
    from master_lite.experiments._creation import checked_config

    expanded, original, _searcher = checked_config(
        DETERMINED_CONFIG, root_dir=tmp_path, runner=None, storage_roots=[tmp_path]
    )
    assert original == DETERMINED_CONFIG
    hps = {name: hp["val"] for name, hp in expanded["hyperparameters"].items()}
    _assert_determined_values({"hyperparameters": hps})
    json.dumps(expanded, allow_nan=False)  # what the store and the API keep


def test_the_det_submit_magic_reads_yaml_1_2(tmp_path: Path) -> None:
    from jupyter_determined.kernel._submission import resolve_config

    _assert_determined_values(resolve_config("cfg", {"cfg": DETERMINED_CONFIG}))
    path = tmp_path / "const.yaml"
    path.write_text(DETERMINED_CONFIG)
    _assert_determined_values(resolve_config(str(path), {}))


def test_duplicate_keys_and_syntax_errors_still_name_the_place() -> None:
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.load("a: 1e-3\nb: 1\na: 2\n", source="exp.yaml")
    assert info.value.errors == ["exp.yaml: line 3, column 1: duplicate key 'a'"]
    with pytest.raises(expconf.InvalidConfig) as info:
        expconf.load("a: [1, 2\n", source="exp.yaml")
    assert info.value.errors[0].startswith("exp.yaml: line ")
