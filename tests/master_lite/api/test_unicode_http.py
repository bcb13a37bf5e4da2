"""Text that cannot be stored: JSON allows a lone UTF-16 surrogate (`"\\ud800"`), which no
UTF-8 text (and so no SQLite TEXT column) can hold. Over HTTP against a real master, such a
body is refused with a 400 naming the field, and nothing of it is stored."""

from __future__ import annotations

import pytest
import requests

from tests._support import MasterProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("unicode-http")) as process:
        yield process


def send(master, method: str, path: str, raw: str, token: str | None = None):
    return requests.request(
        method,
        f"{master.url}/api/v1{path}",
        data=raw.encode(),
        headers={
            "Authorization": f"Bearer {token or master.token}",
            "Content-Type": "application/json",
        },
        timeout=30,
    )


def refused(answer, where: str) -> None:
    assert answer.status_code == 400, answer.text
    message = answer.json()["message"]
    assert message.startswith(f"{where}: "), message
    assert "unpaired surrogate" in message and "valid Unicode" in message


def test_a_model_with_a_lone_surrogate_is_refused_naming_the_field(master):
    refused(send(master, "POST", "/models", '{"name": "a\\ud800b"}'), "body.name")
    refused(
        send(master, "POST", "/models", '{"name": "fine", "description": "\\udfff"}'),
        "body.description",
    )
    models = requests.get(
        f"{master.url}/api/v1/models",
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=30,
    ).json()["models"]
    assert models == []
    # A surrogate pair (one character past U+FFFF) is fine.
    created = send(master, "POST", "/models", '{"name": "emoji \\ud83d\\ude00"}')
    assert created.status_code == 201, created.text
    assert created.json()["model"]["name"] == "emoji \U0001f600"


def test_an_unmanaged_run_and_its_log_lines_with_a_lone_surrogate_are_refused(master):
    before = requests.get(
        f"{master.url}/api/v1/experiments",
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=30,
    ).json()["experiments"]
    refused(send(master, "POST", "/unmanaged/runs", '{"name": "\\ud800"}'), "body.name")
    after = requests.get(
        f"{master.url}/api/v1/experiments",
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=30,
    ).json()["experiments"]
    assert [e["id"] for e in after] == [e["id"] for e in before]

    run = send(master, "POST", "/unmanaged/runs", '{"name": "fine"}').json()
    answer = send(
        master,
        "POST",
        f"/unmanaged/trials/{run['trial_id']}/logs",
        '{"logs": [{"line": "ok"}, {"line": "\\ud800"}]}',
        token=run["token"],
    )
    refused(answer, "body.logs[1].line")
    logs = requests.get(
        f"{master.url}/api/v1/trials/{run['trial_id']}/logs",
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=30,
    )
    assert logs.status_code == 200
    assert "ok" not in [entry["line"] for entry in logs.json()["logs"]]
