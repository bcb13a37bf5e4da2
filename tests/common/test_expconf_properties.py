"""Property tests: configs built only from valid pieces validate and expand idempotently."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from determined.common import expconf

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
small_ints = st.integers(min_value=-1000, max_value=1000)
json_scalars = st.none() | st.booleans() | small_ints | st.text(max_size=6)


@st.composite
def int_range(draw: st.DrawFn) -> tuple[int, int]:
    low = draw(small_ints)
    return low, draw(st.integers(min_value=low + 1, max_value=low + 1000))


@st.composite
def float_range(draw: st.DrawFn) -> tuple[float, float]:
    low = draw(st.floats(min_value=-100, max_value=100))
    return low, low + draw(st.floats(min_value=0.001, max_value=100))


def with_count(spec: dict, count: int | None) -> dict:
    return spec if count is None else {**spec, "count": count}


@st.composite
def typed_leaf(draw: st.DrawFn, grid: bool) -> dict:
    count = (
        draw(st.integers(min_value=1, max_value=5)) if grid else draw(st.none() | st.integers(1, 5))
    )
    kind = draw(st.sampled_from(["const", "int", "double", "log", "categorical"]))
    if kind == "const":
        return {"type": "const", "val": draw(json_scalars)}
    if kind == "categorical":
        return {"type": "categorical", "vals": draw(st.lists(json_scalars, min_size=1, max_size=4))}
    if kind == "int":
        low, high = draw(int_range())
        return with_count({"type": "int", "minval": low, "maxval": high}, count)
    low, high = draw(float_range())
    if kind == "double":
        return with_count({"type": "double", "minval": low, "maxval": high}, count)
    base = draw(st.sampled_from([2, 10, 2.718]))
    return with_count({"type": "log", "minval": low, "maxval": high, "base": base}, count)


def hyperparameters(grid: bool) -> st.SearchStrategy[dict]:
    # Implicit constants must not be mappings (a mapping without `type` is a group), and a group
    # cannot hold a hyperparameter named "type" (it would read as a typed spec).
    leaf = typed_leaf(grid) | json_scalars | st.lists(small_ints, max_size=3)
    hparam_names = names.filter(lambda name: name != "type")
    return st.recursive(
        st.dictionaries(hparam_names, leaf, max_size=4),
        lambda groups: st.dictionaries(hparam_names, leaf | groups, max_size=4),
        max_leaves=12,
    )


lengths = st.builds(
    lambda unit, n: {unit: n},
    st.sampled_from(["batches", "records", "epochs"]),
    st.integers(0, 10**6),
)


@st.composite
def searcher(draw: st.DrawFn) -> dict:
    name = draw(st.sampled_from(expconf.SEARCHER_NAMES))
    result: dict = {"name": name, "metric": draw(names)}
    if draw(st.booleans()):
        result["smaller_is_better"] = draw(st.booleans())
    if name != "single":
        result["max_concurrent_trials"] = draw(st.integers(0, 64))
    if name in ("random", "adaptive_asha", "async_halving"):
        result["max_trials"] = draw(st.integers(1, 500))
    if name in ("adaptive_asha", "async_halving"):
        if draw(st.booleans()):
            result.update(time_metric=draw(names), max_time=draw(st.integers(1, 10**5)))
        else:
            result["max_length"] = {"batches": draw(st.integers(1, 10**5))}
        result["divisor"] = draw(st.sampled_from([2, 3, 4, 4.5]))
    if name == "async_halving":
        result["num_rungs"] = draw(st.integers(1, 6))
    if name == "adaptive_asha":
        result["mode"] = draw(st.sampled_from(["standard", "aggressive", "conservative"]))
    return result


@st.composite
def valid_config(draw: st.DrawFn) -> dict:
    chosen_searcher = draw(searcher())
    config: dict = {"searcher": chosen_searcher}
    optional = {
        "name": names,
        "description": st.none() | st.text(max_size=10),
        "labels": st.lists(names, max_size=3),
        "entrypoint": names.map(lambda s: f"python3 {s}.py")
        | st.lists(names, min_size=1, max_size=3),
        "hyperparameters": hyperparameters(grid=chosen_searcher["name"] == "grid"),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "slots_per_trial": st.integers(0, 8),
                "priority": st.integers(1, 99),
                "max_slots": st.none() | st.integers(1, 16),
            },
        ),
        "max_restarts": st.integers(0, 10),
        "min_validation_period": lengths,
        "min_checkpoint_period": lengths,
        "checkpoint_policy": st.sampled_from(["best", "all", "none"]),
        "reproducibility": st.fixed_dictionaries(
            {"experiment_seed": st.integers(0, expconf.MAX_SEED - 1)}
        ),
        "environment": st.fixed_dictionaries(
            {
                "environment_variables": st.lists(
                    st.builds("{}={}".format, names, st.text(max_size=5)), max_size=3
                )
            }
        ),
        "checkpoint_storage": st.fixed_dictionaries(
            {"type": st.just("shared_fs"), "host_path": names.map(lambda s: f"/tmp/{s}")},
            optional={"save_trial_best": st.integers(0, 5)},
        ),
        "debug": st.booleans(),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            config[key] = draw(strategy)
    return config


@settings(max_examples=150, deadline=None)
@given(valid_config())
def test_valid_configs_validate_and_expand_idempotently(config: dict) -> None:
    original = copy.deepcopy(config)
    assert expconf.validate(config) == []
    expanded = expconf.apply_defaults(
        config, default_checkpoint_storage={"type": "shared_fs", "host_path": "/x"}
    )
    assert config == original
    assert expconf.validate(expanded) == []
    assert expconf.apply_defaults(expanded) == expanded
    assert json.loads(json.dumps(expanded)) == expanded
    # Every leaf survives normalisation with the same spec.
    assert expconf.hparam_leaves(expanded["hyperparameters"]) == expconf.hparam_leaves(
        config.get("hyperparameters")
    )


@settings(max_examples=60, deadline=None)
@given(valid_config(), names)
def test_an_unknown_top_level_key_is_always_reported(config: dict, extra: str) -> None:
    key = f"x_{extra}"
    errors = expconf.validate({**config, key: 1})
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"{key}: unknown key {key!r}")
