"""Strict JSON answers (issue 26, row 3): non-finite floats are answered as the strings "NaN",
"Infinity" and "-Infinity" (Determined's API form), never as bare tokens; best picks skip them."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from master_lite._core import _metric_format, strict_dumps, strict_json_text
from master_lite._core._serialize import finite_json, non_finite_path
from master_lite.api._events import format_event
from master_lite.api._parsing import json_default


def _refuse(token: str) -> Any:
    raise ValueError(token)


def strict_loads(text: str) -> Any:
    return json.loads(text, parse_constant=_refuse)


def test_non_finite_floats_become_strings_at_any_depth() -> None:
    payload = {
        "best_validation": math.nan,
        "trials": [{"metrics": {"loss": math.inf, "acc": -math.inf, "ok": 0.5}}],
        "pair": (math.nan, 1),
        "name": "NaN",
    }
    assert strict_loads(strict_dumps(payload)) == {
        "best_validation": "NaN",
        "trials": [{"metrics": {"loss": "Infinity", "acc": "-Infinity", "ok": 0.5}}],
        "pair": ["NaN", 1],
        "name": "NaN",
    }


def test_finite_answers_are_encoded_as_before() -> None:
    payload = {"a": [1, 2.5, None, True, "x"], "b": {"c": 1e308}}
    assert strict_dumps(payload) == json.dumps(payload)


def test_default_still_applies_after_the_non_finite_copy() -> None:
    import datetime

    moment = datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)
    text = strict_dumps({"when": moment, "loss": math.nan}, default=json_default)
    assert strict_loads(text) == {"when": "2026-01-02T00:00:00.000Z", "loss": "NaN"}


def test_circular_payload_still_raises() -> None:
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError):
        strict_dumps(loop)


def test_sqlite_built_text_is_made_strict_and_other_text_left_alone() -> None:
    # What store._queries splices together: Python's json.dumps text of stored metrics.
    stored = json.dumps([{"metrics": {"loss": math.nan, "up": math.inf, "down": -math.inf}}])
    assert "NaN" in stored and strict_loads(strict_json_text(stored)) == [
        {"metrics": {"loss": "NaN", "up": "Infinity", "down": "-Infinity"}}
    ]
    plain = '[{"metrics": {"loss": 0.5}}]'
    assert strict_json_text(plain) is plain
    # The words inside strings only: the round trip keeps them as they are.
    named = '[{"metrics": {"NaN": 1, "note": "Infinity"}}]'
    assert strict_loads(strict_json_text(named)) == json.loads(named)


def test_events_are_strict_json() -> None:
    event = format_event("metric", {"metrics": {"loss": math.nan}})
    data = event.split("data: ", 1)[1].strip()
    assert strict_loads(data) == {"metrics": {"loss": "NaN"}}


def test_non_finite_path_names_the_first_place() -> None:
    assert non_finite_path({"a": 1, "b": [0.5, {"c": math.inf}]}, "metadata") == "metadata.b[1].c"
    assert non_finite_path({"a": [1, 2.0, "NaN"]}, "metadata") is None
    deep: Any = math.nan
    for _ in range(5000):  # iterative: no RecursionError
        deep = [deep]
    assert non_finite_path(deep, "m") == "m" + "[0]" * 5000


def test_finite_json_leaves_finite_values() -> None:
    assert finite_json({"a": [1, 0.5, None]}) == {"a": [1, 0.5, None]}


def test_best_picks_skip_non_finite_values() -> None:
    assert _metric_format.comparable_metric_value({"loss": math.nan}, "loss") is None
    assert _metric_format.comparable_metric_value({"loss": -math.inf}, "loss") is None
    assert _metric_format.comparable_metric_value({"loss": 0.25}, "loss") == 0.25
    # Shown as they are (a trial's searcher_metric): only the comparisons skip them.
    assert math.isnan(_metric_format.metric_value({"loss": math.nan}, "loss") or 0.0)
