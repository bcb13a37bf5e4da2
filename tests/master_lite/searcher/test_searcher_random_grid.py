"""Random, single and grid searchers: hand-computed operation sequences and hyperparameter rules."""

import math
import random

import pytest

from master_lite.searcher import (
    Close,
    Create,
    ExitedReason,
    Shutdown,
    ValidateAfter,
    grid_points,
    make_searcher,
    sample_hparams,
)

HPARAMS = {"a": {"type": "int", "minval": 1, "maxval": 8}}


def random_config(max_trials=4, concurrency=2, seed=7, hparams=HPARAMS, max_length=None):
    return {
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_trials": max_trials,
            "max_concurrent_trials": concurrency,
            "max_length": max_length if max_length is not None else {"batches": 100},
        },
        "hyperparameters": hparams,
        "reproducibility": {"experiment_seed": seed},
    }


def expected_creates(seed, n):
    """The documented protocol: one Random(seed); per trial the hparams (sorted names) then the seed."""
    rng = random.Random(seed)
    out = []
    for request_id in range(1, n + 1):
        hparams = {"a": rng.randint(1, 8)}
        out.append(Create(request_id, hparams, rng.randrange(2**31)))
    return out


def test_random_four_trials_two_at_a_time_exact_sequence():
    s = make_searcher(random_config())
    c = expected_creates(7, 4)
    assert s.initial_operations() == [c[0], ValidateAfter(1, 100), c[1], ValidateAfter(2, 100)]
    assert s.on_trial_created(1) == []
    assert s.on_validation_completed(1, 0.5, 100) == [Close(1)]
    assert s.on_trial_closed(1) == [c[2], ValidateAfter(3, 100)]
    assert s.on_validation_completed(2, 0.4, 100) == [Close(2)]
    assert s.on_trial_closed(2) == [c[3], ValidateAfter(4, 100)]
    assert s.on_validation_completed(3, 0.3, 100) == [Close(3)]
    assert s.on_trial_closed(3) == []  # budget spent: nothing new
    assert s.on_validation_completed(4, 0.2, 100) == [Close(4)]
    assert s.on_trial_closed(4) == [Shutdown()]
    assert s.on_trial_closed(4) == []  # nothing after the Shutdown


def test_random_ignores_partial_and_repeated_completions():
    s = make_searcher(random_config())
    s.initial_operations()
    assert s.on_validation_completed(1, 0.5, 50) == []  # not its full length yet
    assert s.on_validation_completed(1, 0.5, 100) == [Close(1)]
    assert s.on_validation_completed(1, 0.5, 100) == []
    assert s.on_validation_completed(99, 0.5, 100) == []  # unknown request id


def test_no_concurrency_limit_and_unitless_length():
    s = make_searcher(random_config(max_trials=3, concurrency=0, max_length=5))
    ops = s.initial_operations()
    assert [type(op) for op in ops] == [Create, ValidateAfter] * 3
    assert [op.length for op in ops if isinstance(op, ValidateAfter)] == [5, 5, 5]


def test_missing_max_length_gives_length_one():
    config = random_config(max_trials=1)
    del config["searcher"]["max_length"]
    ops = make_searcher(config).initial_operations()
    assert ops[1] == ValidateAfter(1, 1)


def test_single_is_one_trial():
    config = {
        "searcher": {"name": "single", "metric": "x", "max_length": {"epochs": 3}},
        "hyperparameters": {"lr": 0.1, "opt": {"type": "const", "val": "sgd"}},
        "reproducibility": {"experiment_seed": 1},
    }
    s = make_searcher(config)
    ops = s.initial_operations()
    assert (
        len(ops) == 2
        and ops[0].hparams == {"lr": 0.1, "opt": "sgd"}
        and ops[1] == ValidateAfter(1, 3)
    )
    assert s.on_validation_completed(1, 1.0, 3) == [Close(1)]
    assert s.on_trial_closed(1) == [Shutdown()]


def test_random_replaces_invalid_hp_but_not_errors():
    s = make_searcher(random_config(max_trials=2, concurrency=2))
    s.initial_operations()
    ops = s.on_trial_exited_early(1, ExitedReason.INVALID_HP)
    assert [type(op) for op in ops] == [Create, ValidateAfter] and ops[0].request_id == 3
    assert s.on_trial_exited_early(2, ExitedReason.ERRORED) == []  # counts against max_trials
    assert s.on_validation_completed(3, 1.0, 100) == [Close(3)]
    assert s.on_trial_closed(3) == [Shutdown()]


def test_random_progress_is_mean_over_max_trials():
    s = make_searcher(random_config(max_trials=4, concurrency=2))
    s.initial_operations()
    assert s.progress({1: 0.5, 2: 0.25}) == pytest.approx(0.75 / 4)
    s.on_validation_completed(1, 0.0, 100)
    s.on_trial_closed(1)
    assert s.progress({2: 0.5, 3: 0.0}) == pytest.approx(1.5 / 4)


def test_same_seed_same_hparams_different_seed_different():
    spec = {
        "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10},
        "layers": {"type": "int", "minval": 1, "maxval": 100},
    }

    def first_creates(seed):
        config = random_config(max_trials=5, concurrency=5, seed=seed, hparams=spec)
        return [op for op in make_searcher(config).initial_operations() if isinstance(op, Create)]

    assert first_creates(11) == first_creates(11)
    assert [c.hparams for c in first_creates(11)] != [c.hparams for c in first_creates(12)]
    assert all(0 <= c.trial_seed < 2**31 for c in first_creates(11))


def test_sampled_values_stay_in_range_and_reach_int_bounds():
    spec = {
        "i": {"type": "int", "minval": -2, "maxval": 2},
        "d": {"type": "double", "minval": 0.5, "maxval": 0.75},
        "l": {"type": "log", "minval": -3, "maxval": -1, "base": 10},
        "c": {"type": "categorical", "vals": ["x", 2, None]},
        "k": {"type": "const", "val": [1, 2]},
        "implicit": 3,
        "group": {"inner": {"type": "int", "minval": 0, "maxval": 1}, "deeper": {"z": "q"}},
    }
    rng = random.Random(3)
    ints, cats = set(), set()
    for _ in range(500):
        hp = sample_hparams(spec, rng)
        assert -2 <= hp["i"] <= 2 and isinstance(hp["i"], int)
        assert 0.5 <= hp["d"] < 0.75
        assert 1e-3 <= hp["l"] <= 1e-1 + 1e-12
        assert hp["k"] == [1, 2] and hp["implicit"] == 3
        assert hp["group"]["inner"] in (0, 1) and hp["group"]["deeper"] == {"z": "q"}
        ints.add(hp["i"])
        cats.add(hp["c"])
    assert ints == {-2, -1, 0, 1, 2}
    assert cats == {"x", 2, None}


def test_sampling_visits_names_in_sorted_order():
    rng_a, rng_b = random.Random(5), random.Random(5)
    spec = {
        "zeta": {"type": "int", "minval": 0, "maxval": 1000},
        "alpha": {"type": "int", "minval": 0, "maxval": 1000},
    }
    hp = sample_hparams(spec, rng_a)
    assert hp["alpha"] == rng_b.randint(0, 1000) and hp["zeta"] == rng_b.randint(0, 1000)


def test_unknown_hparam_type_is_an_error_naming_the_path():
    with pytest.raises(ValueError, match=r"hyperparameters\.g\.x\.type"):
        make_searcher(random_config(hparams={"g": {"x": {"type": "uniform"}}}))


# -- grid ----------------------------------------------------------------------------------------


def axis(spec):
    return [p["h"] for p in grid_points({"h": spec})]


def test_grid_int_axes():
    assert axis({"type": "int", "minval": 1, "maxval": 3, "count": 10}) == [1, 2, 3]  # clamped
    assert axis({"type": "int", "minval": 1, "maxval": 4, "count": 1}) == [
        3
    ]  # round(2.5) away from 0
    assert axis({"type": "int", "minval": 0, "maxval": 10, "count": 3}) == [0, 5, 10]
    assert axis({"type": "int", "minval": 0, "maxval": 10, "count": 4}) == [0, 3, 7, 10]


def test_grid_double_log_categorical_const_axes():
    assert axis({"type": "double", "minval": 0.0, "maxval": 1.0, "count": 3}) == [0.0, 0.5, 1.0]
    assert axis({"type": "double", "minval": 1.0, "maxval": 2.0, "count": 1}) == [1.5]
    log = axis({"type": "log", "minval": -3, "maxval": -1, "base": 10, "count": 3})
    assert log == pytest.approx([1e-3, 1e-2, 1e-1])
    assert axis({"type": "log", "minval": 1, "maxval": 3, "base": 2, "count": 1}) == [4.0]
    assert axis({"type": "categorical", "vals": ["c", "a", "b"]}) == ["c", "a", "b"]
    assert axis({"type": "const", "val": 9}) == [9]
    assert axis(9) == [9]


def test_grid_nested_axes_and_empty_group():
    spec = {
        "b": {"type": "categorical", "vals": ["x", "y"]},
        "a": {"inner": {"type": "int", "minval": 1, "maxval": 2, "count": 2}, "c": 5},
        "e": {},
    }
    assert grid_points(spec) == [
        {"a": {"c": 5, "inner": 1}, "b": "x", "e": {}},
        {"a": {"c": 5, "inner": 1}, "b": "y", "e": {}},
        {"a": {"c": 5, "inner": 2}, "b": "x", "e": {}},
        {"a": {"c": 5, "inner": 2}, "b": "y", "e": {}},
    ]


def test_grid_requires_count():
    config = {
        "searcher": {"name": "grid", "metric": "x", "max_length": 10},
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 0.2}},
    }
    with pytest.raises(ValueError, match=r"hyperparameters\.lr\.count"):
        make_searcher(config)


def grid_config(concurrency=2):
    return {
        "searcher": {
            "name": "grid",
            "metric": "x",
            "max_length": {"batches": 10},
            "max_concurrent_trials": concurrency,
        },
        "hyperparameters": {
            "a": {"type": "int", "minval": 1, "maxval": 3, "count": 3},
            "b": {"type": "categorical", "vals": ["p", "q"]},
        },
        "reproducibility": {"experiment_seed": 2},
    }


def test_grid_consumes_points_from_the_end():
    s = make_searcher(grid_config())
    ops = s.initial_operations()
    hparams = [op.hparams for op in ops if isinstance(op, Create)]
    assert hparams == [{"a": 3, "b": "q"}, {"a": 3, "b": "p"}]
    s.on_validation_completed(1, 0.0, 10)
    ops = s.on_trial_closed(1)
    assert (
        ops[0].hparams == {"a": 2, "b": "q"}
        and ops[0].request_id == 3
        and ops[1] == ValidateAfter(3, 10)
    )


def test_grid_runs_every_point_once_and_does_not_replace_invalid_hp():
    s = make_searcher(grid_config(concurrency=0))
    ops = s.initial_operations()
    creates = [op for op in ops if isinstance(op, Create)]
    assert len(creates) == 6
    assert s.on_trial_exited_early(1, ExitedReason.INVALID_HP) == []  # its point is spent
    for rid in range(2, 7):
        assert s.on_validation_completed(rid, 0.0, 10) == [Close(rid)]
        ops = s.on_trial_closed(rid)
    assert ops == [Shutdown()]
    assert sorted((c.hparams["a"], c.hparams["b"]) for c in creates) == sorted(
        (a, b) for a in (1, 2, 3) for b in ("p", "q")
    )


def test_grid_progress_reaches_one_at_shutdown():
    s = make_searcher(grid_config(concurrency=0))
    s.initial_operations()
    for rid in range(1, 7):
        s.on_validation_completed(rid, 0.0, 10)
        s.on_trial_closed(rid)
        if rid == 3:
            assert s.progress({}) == pytest.approx(0.5)
    assert s.progress({}) == 1.0
    assert math.isclose(s.progress({}), 1.0)
