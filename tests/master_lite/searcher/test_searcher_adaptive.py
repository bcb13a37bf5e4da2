"""Adaptive ASHA bracket construction, checked against the formulas computed independently here."""

import itertools
from fractions import Fraction

import pytest

from master_lite.searcher import Create, make_searcher


def config(max_trials, divisor, max_rungs, mode, max_length=100, concurrency=16, seed=0):
    return {
        "searcher": {
            "name": "adaptive_asha",
            "metric": "loss",
            "max_trials": max_trials,
            "divisor": divisor,
            "max_rungs": max_rungs,
            "mode": mode,
            "max_length": {"batches": max_length},
            "max_concurrent_trials": concurrency,
        },
        "hyperparameters": {"lr": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "reproducibility": {"experiment_seed": seed},
    }


def int_log(x, d):
    k = 0
    while d ** (k + 1) <= x:
        k += 1
    return k


def expected_brackets(max_trials, d, max_rungs, mode, length, concurrency):
    top = min(max_rungs, int_log(length, d) + 1, int_log(max_trials, d) + 1)
    rungs = {
        "aggressive": [top],
        "standard": list(range((top - 1) // 2 + 1, top + 1)),
        "conservative": list(range(1, top + 1)),
    }[mode]
    rungs.sort(reverse=True)
    weights = [Fraction(d ** (r - 1), r) for r in rungs]
    trials = [max(1, (w * max_trials / sum(weights)).__floor__()) for w in weights]
    if max_trials - sum(trials) > 0:
        trials[0] += max_trials - sum(trials)
    if concurrency == 0:
        conc = [max(trials[-1], d)] * len(rungs)
    else:
        m = max(concurrency, len(rungs))
        conc = [m // len(rungs) + (1 if i < m % len(rungs) else 0) for i in range(len(rungs))]
    targets = [[max(1, length // d ** (r - 1 - i)) for i in range(r)] for r in rungs]
    return rungs, trials, conc, targets


def test_worked_example_from_the_tutorial():
    s = make_searcher(
        {
            "searcher": {
                "name": "adaptive_asha",
                "metric": "x",
                "max_trials": 10,
                "time_metric": "batches",
                "max_time": 100,
            },
            "hyperparameters": {"increment_by": {"type": "int", "minval": 1, "maxval": 8}},
        }
    )
    assert s.plan.brackets_rungs == [2, 1]
    assert s.plan.brackets_trials == [7, 3]
    assert s.plan.brackets_concurrency == [8, 8]
    assert [e.rung_targets for e in s.engines] == [[25, 100], [100]]
    creates = [op for op in s.initial_operations() if isinstance(op, Create)]
    assert len(creates) == 10  # everything starts at once
    assert [s.bracket_of(c.request_id) for c in creates] == [0] * 7 + [1] * 3


GRID = list(
    itertools.product(
        [1, 2, 3, 7, 16, 50, 1000],
        [2, 3, 4],
        [1, 3, 5],
        ["aggressive", "standard", "conservative"],
        [64, 100, 1000],
        [0, 5, 16],
    )
)


@pytest.mark.parametrize("chunk", range(4))
def test_bracket_grid(chunk):
    for combo in GRID[chunk::4]:
        check_brackets(*combo)


def check_brackets(max_trials, divisor, max_rungs, mode, length, concurrency):
    s = make_searcher(config(max_trials, divisor, max_rungs, mode, length, concurrency))
    rungs, trials, conc, targets = expected_brackets(
        max_trials, divisor, max_rungs, mode, length, concurrency
    )
    where = (max_trials, divisor, max_rungs, mode, length, concurrency)
    assert s.plan.brackets_rungs == rungs, where
    assert s.plan.brackets_trials == trials, where
    assert s.plan.brackets_concurrency == conc, where
    assert [e.rung_targets for e in s.engines] == targets, where
    ops = s.initial_operations()
    creates = [op for op in ops if isinstance(op, Create)]
    expected_initial = sum(
        min(c, t) if c > 0 else max(1, min(divisor ** (r - 1), t))
        for r, t, c in zip(rungs, trials, conc, strict=False)
    )
    assert [c.request_id for c in creates] == list(range(1, expected_initial + 1)), where


def test_explicit_bracket_rungs_are_sorted_descending():
    cfg = config(20, 2, 5, "standard")
    cfg["searcher"]["bracket_rungs"] = [1, 3]
    assert make_searcher(cfg).plan.brackets_rungs == [3, 1]


def test_exact_logs_at_powers():
    # log(64)/log(4) is 2.9999999999999996 in floats; the searcher must still see 3.
    s = make_searcher(config(64, 4, 10, "aggressive", max_length=64))
    assert s.plan.brackets_rungs == [4]
