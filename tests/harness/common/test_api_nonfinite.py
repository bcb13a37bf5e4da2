"""The SDK reads the master's "NaN"/"Infinity"/"-Infinity" back as floats where a number
belongs (metric values, number fields), as Determined's SDK does; other strings stay."""

from __future__ import annotations

import math

from determined.common.api._nonfinite import (
    decode_non_finite,
    encode_non_finite,
    may_hold_non_finite,
)


def test_metric_values_and_number_fields_are_decoded() -> None:
    answer = {
        "experiments": [{"name": "NaN", "labels": ["Infinity"], "best_validation": "NaN"}],
        "metrics": [{"metrics": {"loss": "-Infinity", "nested": {"a": ["Infinity"]}, "s": "x"}}],
        "trial": {"searcher_metric": "Infinity", "best_validation": {"metrics": {"l": "NaN"}}},
    }
    decoded = decode_non_finite(answer)
    experiment = decoded["experiments"][0]
    assert math.isnan(experiment["best_validation"])
    assert experiment["name"] == "NaN" and experiment["labels"] == ["Infinity"]
    metrics = decoded["metrics"][0]["metrics"]
    assert metrics["loss"] == -math.inf
    assert metrics["nested"] == {"a": [math.inf]}
    assert metrics["s"] == "x"
    assert decoded["trial"]["searcher_metric"] == math.inf
    assert math.isnan(decoded["trial"]["best_validation"]["metrics"]["l"])


def test_only_text_that_may_hold_them_is_walked() -> None:
    assert may_hold_non_finite('{"loss": "NaN"}')
    assert may_hold_non_finite('{"loss": "-Infinity"}')
    assert not may_hold_non_finite('{"loss": 0.5, "name": "NaNa"}')


def test_encode_is_the_reverse_for_snapshots() -> None:
    snapshot = {"metrics": [{"metrics": {"loss": math.nan, "up": math.inf}}], "n": (1, -math.inf)}
    encoded = encode_non_finite(snapshot)
    assert encoded == {
        "metrics": [{"metrics": {"loss": "NaN", "up": "Infinity"}}],
        "n": [1, "-Infinity"],
    }
    decoded = decode_non_finite(encoded)
    assert math.isnan(decoded["metrics"][0]["metrics"]["loss"])
