"""Generated experiment configs through the HTTP API of a running master.

* Every valid config (built from valid pieces by the expconf property tests' strategy) is
  accepted (201) and comes back from `GET /experiments/{id}` expanded, valid, with every value
  the user gave unchanged.
* Every config broken at one known path answers 400, and `errors` names that path.
Experiments are created paused (`activate: false`), so nothing runs.
"""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from determined.common import expconf
from determined.common.api import APIError
from tests._support import MasterProcess
from tests.common.test_expconf_properties import valid_config

pytestmark = pytest.mark.slow

SETTINGS = settings(
    max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def _grid_size(config: dict) -> float:
    if config["searcher"]["name"] != "grid":
        return 1
    sizes = []
    for _, spec in expconf.hparam_leaves(config.get("hyperparameters") or {}):
        kind = spec.get("type")
        sizes.append(
            len(spec["vals"])
            if kind == "categorical"
            else spec.get("count", 1)
            if kind in ("int", "double", "log")
            else 1
        )
    return math.prod(sizes)


# A grid of millions of trials is valid but pointless to create here.
small_valid_config = valid_config().filter(lambda c: _grid_size(c) <= 64)


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory):
    # The generated configs keep checkpoints under /tmp (test_expconf_properties.valid_config):
    # an administrator's allowance, as any master whose storage is outside its root dir needs.
    with MasterProcess(
        tmp_path_factory.mktemp("configs") / "root",
        cpu_slots=1,
        env={"MASTER_LITE_CHECKPOINT_STORAGE_ROOTS": "/tmp"},
    ) as running:
        yield running


def _assert_user_values_kept(given_value, stored_value, path: str) -> None:
    """Every value the user wrote is in the expanded config unchanged (defaults may be added;
    hyperparameters are normalised to typed specs, compared via hparam_leaves)."""
    if isinstance(given_value, dict) and isinstance(stored_value, dict):
        for key, value in given_value.items():
            assert key in stored_value, f"{path}.{key} was dropped"
            _assert_user_values_kept(value, stored_value[key], f"{path}.{key}")
    else:
        assert stored_value == given_value, f"{path}: gave {given_value!r}, got {stored_value!r}"


@SETTINGS
@given(config=small_valid_config)
def test_every_valid_config_round_trips(master: MasterProcess, config: dict) -> None:
    original = copy.deepcopy(config)
    answer = master.session.post(
        "/experiments", {"config": config, "context": None, "activate": False}
    )
    exp_id = answer["experiment"]["id"]
    stored = master.session.get(f"/experiments/{exp_id}")["experiment"]["config"]
    assert expconf.validate(stored) == []
    assert expconf.apply_defaults(stored) == stored  # fully expanded
    for key, value in original.items():
        if key == "hyperparameters":
            assert expconf.hparam_leaves(stored[key]) == expconf.hparam_leaves(value)
        else:
            _assert_user_values_kept(value, stored[key], key)


# (path, a wrong value for it): each breaks a valid config at exactly that path.
BREAKAGES = [
    ("max_restarts", "lots"),
    ("max_restarts", -1),
    ("searcher.metric", 5),
    ("searcher.name", "sometimes"),
    ("searcher.smaller_is_better", "yes"),
    ("resources.slots_per_trial", "two"),
    ("resources.slots_per_trial", -3),
    ("checkpoint_policy", "sometimes"),
    ("min_validation_period", {"minutes": 3}),
    ("hyperparameters.bad", {"type": "int", "minval": 5, "maxval": 1}),
    ("hyperparameters.bad", {"type": "categorical", "vals": []}),
    ("hyperparameters.bad", {"type": "wobbly"}),
    ("reproducibility.experiment_seed", -5),
    ("environment.environment_variables", 7),
    ("labels", "not-a-list"),
    ("resources.not_a_key", 1),
    ("not_a_top_level_key", 1),
]


def _set_path(config: dict, path: str, value) -> dict:
    broken = copy.deepcopy(config)
    *parents, leaf = path.split(".")
    node = broken
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[leaf] = value
    return broken


@SETTINGS
@given(config=small_valid_config, breakage=st.sampled_from(BREAKAGES))
def test_every_invalid_config_is_a_400_naming_the_path(
    master: MasterProcess, config: dict, breakage: tuple[str, object]
) -> None:
    path, value = breakage
    if path.startswith("hyperparameters.") and config["searcher"]["name"] == "grid":
        config = {**config, "hyperparameters": {}}
    broken = _set_path(config, path, value)
    with pytest.raises(APIError) as caught:
        master.session.post("/experiments", {"config": broken, "context": None, "activate": False})
    error = caught.value
    assert error.status == 400, error
    named = [line for line in (error.errors or []) if line.split(":", 1)[0].startswith(path)]
    assert named, f"no error names {path}: {error.errors}"
