"""No 5xx for bad input, and caps on what is stored (issue 26, rows 13 and 15), against a real
master over HTTP.

Row 13: bodies nested thousands deep (the JSON parser's recursion), metrics and unmanaged
`hparams` nested hundreds deep (recursion after parsing: validation, copies), integers past
SQLite's 64 bits (`steps_completed` = 2^63, one of 5,000 digits), a YAML config nested deep, and
context members whose path cannot be created (a component over 255 bytes, a path over 3 KiB)
→ 400 naming the field and the limit, nothing stored.

Row 15: names, descriptions, labels, metadata and `max_slots` past their limits → 400 naming the
field and the limit; an unmanaged trial that ended takes no more metrics (409, as its logs).
The limits are `master_lite._core._limits` (docs/rest-api.md, "Limits").
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
from typing import Any

import pytest
import requests

from master_lite._core import _limits
from tests._support import MasterProcess

pytestmark = pytest.mark.slow

CONFIG = {
    "name": "limits",
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("input-limits")) as process:
        yield process


def call(
    master: MasterProcess,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    token: str | None = None,
) -> requests.Response:
    return requests.request(
        method,
        f"{master.url}/api/v1{path}",
        data=raw if raw is not None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token or master.token}",
            "Content-Type": "application/json",
        },
        timeout=60,
    )


def refused(answer: requests.Response, status: int, *words: str) -> str:
    """The answer's message, once it is `status` and names every one of `words`."""
    assert answer.status_code == status, (answer.status_code, answer.text[:500])
    message = answer.json()["message"]
    for word in words:
        assert word in message, (word, message[:500])
    return message


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def experiment_ids(master: MasterProcess) -> list[int]:
    return [e["id"] for e in call(master, "GET", "/experiments").json()["experiments"]]


def open_run(master: MasterProcess, external: str, **fields: Any) -> requests.Response:
    body = {"name": "limits", "external_experiment_id": external, "external_trial_id": external}
    return call(master, "POST", "/unmanaged/runs", {**body, **fields})


def stored_metrics(master: MasterProcess, trial_id: int) -> list[dict]:
    return call(master, "GET", f"/trials/{trial_id}/metrics").json()["metrics"]


def context(members: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


# --- row 13: depth, integers, member paths -------------------------------------------------------


def test_a_body_nested_thousands_deep_is_a_400_not_a_recursion_error(master):
    raw = b"[" * 5000 + b"]" * 5000
    for path in ("/models", "/unmanaged/runs", "/experiments"):
        refused(call(master, "POST", path, raw=raw), 400, "nested deeper than", "levels")
    deep_object = ('{"a":' * 5000 + "1" + "}" * 5000).encode()
    refused(call(master, "POST", "/models", raw=deep_object), 400, "nested deeper than")
    # Just past the limit (well within the parser's recursion): the walk, naming where.
    message = refused(
        call(
            master,
            "POST",
            "/models",
            {"name": "deep", "metadata": nested(_limits.MAX_JSON_DEPTH + 1)},
        ),
        400,
        "body.metadata.a.a",
        f"nested deeper than {_limits.MAX_JSON_DEPTH}",
    )
    assert message.startswith("invalid request body: body.metadata")
    assert "deep" not in [m["name"] for m in call(master, "GET", "/models").json()["models"]]


def test_metrics_and_hparams_nested_hundreds_deep_are_refused_before_they_are_stored(master):
    refused(
        open_run(master, "deep-hparams", hparams={"x": nested(500)}),
        400,
        "body.hparams.x.a",
        "nested deeper than",
    )
    run = open_run(master, "deep-metrics").json()
    trial_id = run["trial_id"]
    report = {"group": "training", "steps_completed": 1, "metrics": {"loss": nested(900)}}
    path = f"/trials/{trial_id}/metrics"
    refused(
        call(master, "POST", path, {"reports": [report]}, token=run["token"]),
        400,
        "body.reports[0].metrics.loss.a",
    )
    determined_form = {
        "group": "training",
        "metrics": {"stepsCompleted": 1, "metrics": {"avgMetrics": {"loss": nested(900)}}},
    }
    refused(call(master, "POST", path, determined_form, token=run["token"]), 400, "nested deeper")
    assert stored_metrics(master, trial_id) == []
    # A body within the limit still lands.
    fine = {"group": "training", "steps_completed": 1, "metrics": {"loss": 0.5, "deep": nested(8)}}
    ok = call(master, "POST", path, {"reports": [fine]}, token=run["token"])
    assert ok.status_code == 200, ok.text
    assert [m["steps_completed"] for m in stored_metrics(master, trial_id)] == [1]


@pytest.mark.parametrize(
    "digits",
    [str(2**63), str(-(2**63) - 1), "1" + "0" * 5000],
    ids=["2^63", "-2^63-1", "5k-digits"],
)
def test_an_integer_past_64_bits_is_a_400_naming_the_field(master, digits):
    run = open_run(master, f"big-int-{digits[:12]}").json()
    path = f"/trials/{run['trial_id']}/metrics"
    raw = (
        '{"reports": [{"group": "training", "steps_completed": '
        + digits
        + ', "metrics": {"loss": 0.5}}]}'
    ).encode()
    answer = call(master, "POST", path, raw=raw, token=run["token"])
    refused(answer, 400, "64 bits")
    if len(digits) < 100:
        assert "body.reports[0].steps_completed" in answer.json()["message"]
    assert stored_metrics(master, run["trial_id"]) == []
    # 2^63 - 1 is SQLite's largest integer: it is stored.
    edge = {"group": "training", "steps_completed": 2**63 - 1, "metrics": {"loss": 0.5}}
    ok = call(master, "POST", path, {"reports": [edge]}, token=run["token"])
    assert ok.status_code == 200, ok.text


def test_an_integer_past_64_bits_anywhere_in_a_body_is_a_400(master):
    refused(
        call(master, "POST", "/models", {"name": "big", "metadata": {"n": [1, 2**64]}}),
        400,
        "body.metadata.n[1]",
        "64 bits",
    )
    checkpoint = {
        "uuid": "0b5f7a4c-1d2e-4f60-8a9b-0c1d2e3f4a5b",
        "trialId": 1,
        "metadata": {"steps_completed": 1},
        "resources": {"model.pt": "9" * 5000},
    }
    answer = call(master, "POST", "/checkpoints", checkpoint)
    assert answer.status_code == 400, answer.text
    assert "body.resources.model.pt" in answer.json()["message"]


def test_a_yaml_config_nested_deep_is_a_400(master):
    before = experiment_ids(master)
    text = "name: deep\nentrypoint: x\nsearcher: {name: single, metric: loss, max_length: 1}\n"
    for deep in ("data: " + "[" * 3000 + "]" * 3000 + "\n", f"data: {json.dumps(nested(200))}\n"):
        answer = call(master, "POST", "/experiments", {"config": text + deep, "activate": False})
        refused(answer, 400, "nested deeper than")
    assert experiment_ids(master) == before


@pytest.mark.parametrize(
    "member, words",
    [
        ("a" * 300 + ".py", ["component of 303 bytes", "255"]),
        ("/".join(["d" * 200] * 20) + "/x.py", ["bytes long", "3072"]),
    ],
)
def test_a_context_member_path_too_long_to_create_is_a_400_naming_it(master, member, words):
    before = experiment_ids(master)
    body = {
        "config": CONFIG,
        "context": context({"train.py": b"pass\n", member: b"x"}),
        "activate": False,
    }
    message = refused(call(master, "POST", "/experiments", body), 400, "context:", *words)
    assert member[:50] in message
    assert experiment_ids(master) == before


# --- row 15: caps on what is stored --------------------------------------------------------------

BIG_NAME = "n" * (_limits.MAX_NAME_CHARS + 1)


def test_names_over_the_limit_are_refused_naming_field_and_limit(master):
    limit = str(_limits.MAX_NAME_CHARS)
    refused(call(master, "POST", "/models", {"name": "m" * 10_000_000}), 400, "body.name", limit)
    refused(call(master, "POST", "/models", {"name": BIG_NAME}), 400, "body.name", limit)
    assert all(len(m["name"]) < 1000 for m in call(master, "GET", "/models").json()["models"])
    model = call(master, "POST", "/models", {"name": "n" * _limits.MAX_NAME_CHARS})
    assert model.status_code == 201, model.text

    before = experiment_ids(master)
    for config in ({**CONFIG, "name": "e" * 5_000_000}, {**CONFIG, "name": BIG_NAME}):
        body = {"config": config, "context": context({"train.py": b"pass\n"}), "activate": False}
        refused(call(master, "POST", "/experiments", body), 400, "name:", limit)
    refused(open_run(master, "big-name", name=BIG_NAME), 400, "body.name", limit)
    assert experiment_ids(master) == before

    run = open_run(master, "rename").json()
    path = f"/experiments/{run['experiment_id']}"
    refused(call(master, "PATCH", path, {"name": BIG_NAME}), 400, "body.name", limit)
    refused(
        call(master, "PATCH", path, {"description": "d" * (_limits.MAX_DESCRIPTION_CHARS + 1)}),
        400,
        "body.description",
        str(_limits.MAX_DESCRIPTION_CHARS),
    )
    assert call(master, "GET", path).json()["experiment"]["name"] == "limits"


def test_labels_over_the_limits_are_refused(master):
    run = open_run(master, "labels").json()
    path = f"/experiments/{run['experiment_id']}"
    many = [f"l{i}" for i in range(50_000)]
    refused(
        call(master, "PATCH", path, {"labels": many}), 400, "body.labels", "50000 items", "1000"
    )
    long_label = "x" * (_limits.MAX_LABEL_CHARS + 1)
    refused(
        call(master, "PATCH", path, {"labels": ["ok", long_label]}), 400, "body.labels[1]", "255"
    )
    refused(call(master, "POST", "/models", {"name": "lab", "labels": many}), 400, "body.labels")
    body = {"config": {**CONFIG, "labels": many}, "context": context({"train.py": b""})}
    refused(call(master, "POST", "/experiments", body), 400, "labels:", "1000")
    assert call(master, "GET", path).json()["experiment"]["labels"] == []
    ok = call(master, "PATCH", path, {"labels": ["x" * _limits.MAX_LABEL_CHARS]})
    assert ok.status_code == 200, ok.text


def test_metadata_over_the_limit_is_refused(master):
    limit = str(_limits.MAX_METADATA_BYTES)
    huge = {"blob": "b" * (_limits.MAX_METADATA_BYTES + 1)}
    refused(
        call(master, "POST", "/models", {"name": "meta", "metadata": huge}), 400, "metadata", limit
    )
    model = call(master, "POST", "/models", {"name": "meta2", "metadata": {"a": 1}})
    assert model.status_code == 201
    refused(call(master, "PATCH", "/models/meta2", {"metadata": huge}), 400, "metadata", limit)
    assert call(master, "GET", "/models/meta2").json()["model"]["metadata"] == {"a": 1}


def test_slots_out_of_range_are_refused(master):
    run = open_run(master, "slots").json()
    path = f"/experiments/{run['experiment_id']}"
    refused(call(master, "PATCH", path, {"resources": {"max_slots": 2**63}}), 400, "64 bits")
    refused(
        call(master, "PATCH", path, {"resources": {"max_slots": 2**31}}),
        400,
        "body.resources.max_slots",
        str(_limits.MAX_SLOTS),
    )
    for resources in ({"max_slots": 2**31}, {"slots_per_trial": 2**31}):
        body = {"config": {**CONFIG, "resources": resources}, "context": context({"t.py": b""})}
        refused(
            call(master, "POST", "/experiments", body), 400, "resources.", str(_limits.MAX_SLOTS)
        )
    ok = call(master, "PATCH", path, {"resources": {"max_slots": _limits.MAX_SLOTS}})
    assert ok.status_code == 200, ok.text


def test_an_ended_unmanaged_trial_takes_no_more_metrics_as_no_more_logs(master):
    run = open_run(master, "ended").json()
    trial_id = run["trial_id"]
    report = {"group": "training", "steps_completed": 3, "metrics": {"loss": 0.5}}
    metrics_path = f"/trials/{trial_id}/metrics"
    # While it runs, its last report before close() lands.
    ok = call(master, "POST", metrics_path, {"reports": [report]}, token=run["token"])
    assert ok.status_code == 200, ok.text
    closed = call(
        master,
        "POST",
        f"/unmanaged/trials/{trial_id}/close",
        {"state": "COMPLETED"},
        token=run["token"],
    )
    assert closed.status_code == 200, closed.text
    late = {**report, "steps_completed": 4}
    # The run's token is dead; the user token is refused too, as for the logs.
    logs = call(master, "POST", f"/unmanaged/trials/{trial_id}/logs", {"logs": [{"line": "x"}]})
    refused(logs, 409, "COMPLETED")
    refused(call(master, "POST", metrics_path, {"reports": [late]}), 409, "COMPLETED", "resume")
    assert [m["steps_completed"] for m in stored_metrics(master, trial_id)] == [3]
    # Resumed by its external ids, it reports again.
    resumed = open_run(master, "ended").json()
    assert resumed["trial_id"] == trial_id and resumed["resumed"]
    again = call(master, "POST", metrics_path, {"reports": [late]}, token=resumed["token"])
    assert again.status_code == 200, again.text


# --- every operation with a body -----------------------------------------------------------------

SAMPLE_PATH_VALUES = {
    "experiment_id": "1",
    "trial_id": "1",
    "allocation_id": "trial-1.1",
    "uuid": "0b5f7a4c-1d2e-4f60-8a9b-0c1d2e3f4a5b",
    "model": "meta2",
    "version": "1",
}
BAD_BODIES = {
    "5k-deep": b"[" * 5000 + b"]" * 5000,
    "past-the-depth-limit": b'{"a":' * 100 + b"1" + b"}" * 100,
    "big-int": b'{"name": "x", "metadata": {"n": 1' + b"0" * 30 + b'}, "steps_completed": 1e400}',
    "5k-digit-int": b'{"name": 1' + b"0" * 5000 + b"}",
    "non-finite": b'{"name": NaN, "metadata": {"x": Infinity}, "progress": -Infinity}',
    "huge-string": b'{"name": "' + b"a" * 2_000_000 + b'", "line": "b"}',
}


def test_no_operation_answers_5xx_to_a_deep_huge_or_out_of_range_body(master):
    """Every operation the route table declares with a request body, with each bad body."""
    from master_lite.api import ROUTES

    failures = []
    for route in ROUTES:
        path = route.path
        for param in route.params:
            value = SAMPLE_PATH_VALUES.get(param.name) or param.schema.get("enum", ["x"])[0]
            path = path.replace("{" + param.name + "}", value)
        for method, operation in route.operations.items():
            if operation.request is None:
                continue
            for name, raw in BAD_BODIES.items():
                answer = call(master, method.upper(), path, raw=raw)
                if answer.status_code >= 500:
                    failures.append(f"{method.upper()} {path} {name}: {answer.status_code}")
    assert not failures, failures
