"""Model names over HTTP against a real master: as in Determined, a new or changed name may
not equal another model's in any case (Determined: "avoid names equal to other models
(case-insensitive)"), so that `MNIST` and `mnist` never name two models; lookups stay exact."""

from __future__ import annotations

import urllib.parse

import pytest
import requests

from tests._support import MasterProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("models-case")) as process:
        yield process


def call(master, method: str, path: str, body=None):
    answer = requests.request(
        method,
        f"{master.url}/api/v1{path}",
        json=body,
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=30,
    )
    return answer.status_code, answer.json()


def test_a_name_equal_to_another_models_in_another_case_is_refused(master):
    assert call(master, "POST", "/models", {"name": "MNIST cnn"})[0] == 201
    for taken in ("mnist CNN", "Mnist Cnn", "MNIST cnn"):
        status, answer = call(master, "POST", "/models", {"name": taken})
        assert status == 409, answer
        assert "'MNIST cnn' already exists" in answer["message"], answer
        assert "any case" in answer["message"]
    # Unicode letters fold too.
    assert call(master, "POST", "/models", {"name": "Straße"})[0] == 201
    assert call(master, "POST", "/models", {"name": "STRASSE"})[0] == 409
    names = [m["name"] for m in call(master, "GET", "/models")[1]["models"]]
    assert sorted(names) == ["MNIST cnn", "Straße"]
    # A lookup by name stays exact.
    quoted = urllib.parse.quote("mnist CNN", safe="")
    assert call(master, "GET", f"/models/{quoted}")[0] == 404


def test_renaming_to_another_models_name_in_another_case_is_refused_but_recasing_is_not(master):
    assert call(master, "POST", "/models", {"name": "resnet"})[0] == 201
    assert call(master, "POST", "/models", {"name": "vgg"})[0] == 201
    status, answer = call(master, "PATCH", "/models/vgg", {"name": "ResNet"})
    assert status == 409 and "'resnet' already exists" in answer["message"], answer
    # A model may change the case of its own name.
    status, answer = call(master, "PATCH", "/models/vgg", {"name": "VGG"})
    assert status == 200 and answer["model"]["name"] == "VGG", answer
