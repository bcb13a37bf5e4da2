"""Schemathesis against the OpenAPI document a running master serves: for every operation,
generated requests (valid and invalid) never get a 5xx, and every answer matches the document
(status code declared, content type declared, body valid against the response schema).

Long polls are capped at 0.2 s and the endless event stream gets a few hand-written queries
instead (the stream is closed after the headers), so the run stays short; `FUZZ_EXAMPLES` (default 12)
sets examples per operation and mode (`make soak` raises it).
"""

from __future__ import annotations

import os
import pathlib

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
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
