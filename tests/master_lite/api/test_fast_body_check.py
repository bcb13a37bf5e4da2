"""The hand-written check on the metrics hot path never accepts what the route's schema refuses."""

from __future__ import annotations

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from master_lite.api._parsing import openapi_to_jsonschema
from master_lite.api._schemas import METRICS_BODY, is_plain_metrics_batch

SCHEMA = jsonschema.Draft7Validator(openapi_to_jsonschema(METRICS_BODY))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
report_keys = st.sampled_from(
    ["group", "steps_completed", "metrics", "batch_metrics", "report_time", "trial_run_id", "x"]
)
near_reports = st.dictionaries(
    report_keys,
    json_values | st.dictionaries(st.text(max_size=3), st.floats(allow_nan=False), max_size=3),
    max_size=6,
)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({"reports": st.lists(near_reports, max_size=4)}),
    st.fixed_dictionaries({"reports": json_values}),
)


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_fast_check_accepts_only_schema_valid_bodies(body):
    if is_plain_metrics_batch(body):
        assert SCHEMA.is_valid(body), body


def test_fast_check_accepts_what_the_harness_sends():
    body = {
        "reports": [
            {
                "group": "training",
                "steps_completed": 10,
                "metrics": {"loss": 0.5},
                "report_time": "2026-11-22T00:00:00Z",
                "trial_run_id": 1,
            },
            {
                "group": "validation",
                "steps_completed": 10,
                "metrics": {"acc": 0.9},
                "batch_metrics": [{"loss": 0.4}],
            },
        ]
    }
    assert is_plain_metrics_batch(body) and SCHEMA.is_valid(body)


def test_fast_check_leaves_bad_bodies_to_the_schema():
    for body in (
        {"reports": [{"group": "training", "steps_completed": True, "metrics": {}}]},
        {
            "reports": [
                {"group": "training", "steps_completed": 1, "metrics": {}, "report_time": None}
            ]
        },
        {"reports": [], "group": "training", "metrics": {}},
        {"group": "training", "metrics": {"stepsCompleted": 1}},
    ):
        assert not is_plain_metrics_batch(body), body
