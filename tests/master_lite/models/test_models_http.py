"""The /api/v1/models endpoints over HTTP against a real master-lite: statuses, bodies,
Determined's `checkpointUuid` spelling, names that need URL quoting, the user token, the
`model` live event, and the OpenAPI document. (Every route x every caller is
tests/reliability/test_auth_matrix.py.)"""

from __future__ import annotations

import json
import urllib.parse

import pytest
import requests

from tests._support import MasterProcess, submit, wait_for_experiment

pytestmark = pytest.mark.slow

TRAIN_PY = """
import pathlib
from determined import core

with core.init() as core_context:
    for op in core_context.searcher.operations():
        with core_context.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
            (pathlib.Path(path) / "weights").write_text("w")
        op.report_completed(1.0)
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("models-api")) as process:
        yield process


@pytest.fixture(scope="module")
def checkpoint_uuid(master) -> str:
    config = {
        "name": "models-api",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
    }
    exp_id = submit(master, config, {"train.py": TRAIN_PY})
    wait_for_experiment(master, exp_id, {"COMPLETED"})
    [checkpoint] = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    return checkpoint["uuid"]


def call(master, method: str, path: str, body=None, *, token: str | None = "user", **params):
    headers = {"Authorization": f"Bearer {master.token if token == 'user' else token}"}
    if token is None:
        headers = {}
    response = requests.request(
        method,
        f"{master.url}/api/v1{path}",
        json=body,
        params=params or None,
        headers=headers,
        timeout=30,
    )
    return response.status_code, response.json()


def test_models_need_the_user_token(master):
    assert call(master, "GET", "/models", token=None)[0] == 401
    assert call(master, "POST", "/models", {"name": "x"}, token="not-a-token")[0] == 401
    assert call(master, "GET", "/models")[0] == 200


def test_create_read_patch_archive_delete(master):
    status, answer = call(master, "POST", "/models", {"name": "api model", "labels": ["a"]})
    assert status == 201
    model = answer["model"]
    assert model["name"] == "api model" and model["labels"] == ["a"] and model["num_versions"] == 0
    assert model["creation_time"].endswith("Z")
    path = "/models/" + urllib.parse.quote("api model", safe="")
    assert call(master, "GET", path)[1]["model"]["id"] == model["id"]
    assert call(master, "GET", f"/models/{model['id']}")[1]["model"]["name"] == "api model"

    status, answer = call(master, "PATCH", path, {"description": "d", "metadata": {"k": 1}})
    assert status == 200 and answer["model"]["metadata"] == {"k": 1}
    assert call(master, "POST", f"{path}/archive")[1]["model"]["archived"] is True
    status, answer = call(master, "PATCH", path, {"description": "no"})
    assert status == 409 and "unarchive it first" in answer["message"]
    assert call(master, "POST", f"{path}/unarchive")[1]["model"]["archived"] is False
    assert call(master, "GET", "/models", archived="false")[1]["models"][0]["name"] == "api model"
    assert call(master, "GET", "/model/labels")[1]["labels"] == ["a"]

    assert call(master, "DELETE", path) == (200, {})
    status, answer = call(master, "GET", path)
    assert status == 404 and answer["message"] == "model 'api model' not found"


def test_bad_input_is_named(master):
    status, answer = call(master, "POST", "/models", {"description": "no name"})
    assert status == 400 and "name" in answer["message"]
    status, answer = call(master, "POST", "/models", {"name": "x", "labels": "a"})
    assert status == 400 and "body.labels" in answer["message"]
    status, answer = call(master, "POST", "/models", {"name": "a/b"})
    assert status == 400 and answer["errors"] == [
        "name: model names cannot have slashes, got 'a/b'"
    ]
    call(master, "POST", "/models", {"name": "twice"})
    assert call(master, "POST", "/models", {"name": "twice"})[0] == 409
    status, answer = call(master, "GET", "/models", sort_by="size")
    assert status == 400 and "sort_by" in answer["message"]
    status, answer = call(master, "POST", "/models/twice/versions", {"name": "no uuid"})
    assert status == 400
    # An id past SQLite's 64-bit range names no model (it once overflowed into a 500).
    status, answer = call(master, "POST", f"/models/{2**64}/unarchive")
    assert status == 404 and answer["message"] == f"model {2**64} not found"


def test_versions_over_http(master, checkpoint_uuid):
    call(master, "POST", "/models", {"name": "versioned"})
    # Determined's request body spells it checkpointUuid.
    status, answer = call(
        master, "POST", "/models/versioned/versions", {"checkpointUuid": checkpoint_uuid}
    )
    assert status == 201
    version = answer["model_version"]
    assert (version["version"], version["model_name"]) == (1, "versioned")
    assert version["checkpoint"]["uuid"] == checkpoint_uuid
    status, answer = call(
        master,
        "POST",
        "/models/versioned/versions",
        {"checkpoint_uuid": checkpoint_uuid, "name": "v2", "metadata": {"m": 1}},
    )
    assert status == 201 and answer["model_version"]["version"] == 2

    listed = call(master, "GET", "/models/versioned/versions", order_by="desc")[1]
    assert [v["version"] for v in listed["model_versions"]] == [2, 1]
    patched = call(master, "PATCH", "/models/versioned/versions/2", {"comment": "c"})[1]
    assert patched["model_version"]["comment"] == "c" and patched["model_version"]["name"] == "v2"
    status, answer = call(master, "GET", "/models/versioned/versions/3")
    assert status == 404 and "its versions: 1, 2" in answer["message"]

    status, answer = call(master, "DELETE", f"/checkpoints/{checkpoint_uuid}")
    assert status == 409
    assert "version 1 of model 'versioned', version 2 of model 'versioned'" in answer["message"]
    assert call(master, "DELETE", "/models/versioned/versions/1") == (200, {})
    assert call(master, "DELETE", "/models/versioned/versions/2") == (200, {})
    status, answer = call(master, "DELETE", f"/checkpoints/{checkpoint_uuid}")
    assert status == 200 and answer["checkpoint"]["state"] == "DELETED"


def test_changes_are_live_model_events(master):
    with requests.get(
        f"{master.url}/api/v1/events",
        params={"types": "model"},
        headers={"Authorization": f"Bearer {master.token}"},
        stream=True,
        timeout=30,
    ) as stream:
        lines = stream.iter_lines(decode_unicode=True)
        call(master, "POST", "/models", {"name": "evented"})
        event = data = None
        for line in lines:
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: ") and event == "model":
                data = json.loads(line[len("data: ") :])
                break
    assert data is not None and data["name"] == "evented"


def test_openapi_documents_the_registry(master):
    document = call(master, "GET", "/openapi.json")[1]
    for path in (
        "/api/v1/models",
        "/api/v1/models/{model}",
        "/api/v1/models/{model}/versions",
        "/api/v1/models/{model}/versions/{version}",
        "/api/v1/models/{model}/{action}",
        "/api/v1/model/labels",
    ):
        assert path in document["paths"], path
    assert document["paths"]["/api/v1/models"]["post"]["responses"]["201"]
    schemas = document["components"]["schemas"]
    assert {"Model", "ModelVersion"} <= set(schemas)
    assert schemas["ModelVersion"]["properties"]["checkpoint"]["allOf"] == [
        {"$ref": "#/components/schemas/Checkpoint"}
    ]
