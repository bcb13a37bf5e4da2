"""Schemathesis against the OpenAPI document a running master serves: for every operation,
generated requests (valid and invalid) never get a 5xx, and every answer matches the document
(status code declared, content type declared, body valid against the response schema).

Besides schemathesis's own cases, each operation with a JSON body gets its generated bodies
mutated the ways attackers and diverging runs send them (issue 26 row 13): a field nested
hundreds deep, an integer past 64 bits, a non-finite number (`NaN`, `Infinity` tokens), a huge
string; the answer is never a 5xx.

Long polls are capped at 0.2 s and the endless event stream gets a few hand-written queries
instead (the stream is closed after the headers), so the run stays short; `FUZZ_EXAMPLES` (default 12)
sets examples per operation and mode (`make soak` raises it).
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests._support import MasterProcess

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


# How a generated body is made hostile: the JSON text of one of its fields is replaced.
MUTATIONS = ("deep", "big_int", "nan", "infinity", "huge_string")


def _hostile(mutation: str) -> str:
    """The JSON text a mutated field gets (not all of it is valid strict JSON, on purpose)."""
    if mutation == "deep":
        return "[" * 600 + "1" + "]" * 600
    if mutation == "big_int":
        return str(2**70)
    if mutation == "nan":
        return "NaN"
    if mutation == "infinity":
        return "-Infinity"
    return json.dumps("x" * 3_000_000)


def _mutated_body(body: dict, key: str, mutation: str) -> str:
    """`body` as JSON text with field `key` replaced by the hostile text."""
    marker = "\u0000mutated\u0000"
    text = json.dumps({**body, key: marker})
    return text.replace(json.dumps(marker), _hostile(mutation), 1)


def _operations(schema) -> list:
    found = []
    for result in schema.get_all_operations():
        found.append(result.ok())
    return found


def test_no_server_errors_and_answers_match_the_document(tmp_path: pathlib.Path) -> None:
    # One slot: a fuzzed config that happens to be valid runs at most one trial at a time.
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        schema = schemathesis.openapi.from_url(f"{master.url}/api/v1/openapi.json")
        operations = _operations(schema)
        assert len(operations) >= 25
        headers = {"Authorization": f"Bearer {master.token}"}
        failures: list[str] = []
        for operation in operations:
            if operation.path.endswith("/events"):
                continue  # an endless stream: checked below with its query fuzzed by hand
            label = f"{operation.method.upper()} {operation.path}"
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    database=None,
                    phases=[Phase.explicit, Phase.generate],  # no shrinking: slow
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=operation.as_strategy(generation_mode=mode))
                def check(case) -> None:
                    if isinstance(case.query, dict) and "timeout_seconds" in case.query:
                        case.query["timeout_seconds"] = 0.2
                    response = case.call(base_url=f"{master.url}", headers=headers, timeout=30)
                    case.validate_response(response, checks=CHECKS)

                try:
                    check()
                except Exception as exc:  # every operation's first failure (groups included)
                    failures.append(f"{label} ({mode.value}): {str(exc)[:1500]}")

            @settings(
                max_examples=max(EXAMPLES // 2, len(MUTATIONS)),
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(
                case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
                mutation=st.sampled_from(MUTATIONS),
                pick=st.integers(min_value=0),
            )
            def hostile(case, mutation: str, pick: int) -> None:
                if not isinstance(case.body, dict) or not case.body:
                    return  # no JSON object body to mutate
                keys = sorted(case.body)
                kwargs = case.as_transport_kwargs(base_url=master.url, headers=headers)
                kwargs.pop("json", None)
                kwargs["data"] = _mutated_body(case.body, keys[pick % len(keys)], mutation)
                kwargs.setdefault("headers", {})["Content-Type"] = "application/json"
                response = requests.request(**kwargs, timeout=60)
                assert response.status_code < 500, (
                    f"{mutation} in {keys[pick % len(keys)]}: {response.status_code} "
                    f"{response.text[:500]}"
                )

            try:
                hostile()
            except Exception as exc:
                failures.append(f"{label} (hostile bodies): {str(exc)[:1500]}")
        for query in (
            {},
            {"types": "metric,log"},
            {"types": "nope"},
            {"experiment_id": "x"},
            {"trial_id": str(2**70)},
        ):
            with requests.get(
                f"{master.url}/api/v1/events",
                params=query,
                headers=headers,
                stream=True,
                timeout=30,
            ) as response:
                if response.status_code != 200:
                    assert response.status_code == 400, (query, response.status_code)
                    assert response.json()["message"]
                else:
                    assert response.headers["Content-Type"].startswith("text/event-stream")
        log = master.log_text()
    assert not failures, "\n\n".join(failures) + "\n\nmaster log tail:\n" + log[-3000:]
