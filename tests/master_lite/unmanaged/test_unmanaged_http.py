"""Unmanaged runs over HTTP against a real master: what a run's kernel (or anything holding its
token) may send, and that nothing it sends can make the trial's stored logs unreadable."""

from __future__ import annotations

import pytest
import requests

from tests._support import MasterProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("unmanaged-http")) as process:
        yield process


def post(master, path: str, *, token: str, json=None, data=None):
    return requests.post(
        f"{master.url}/api/v1{path}",
        json=json,
        data=data,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def open_run(master, external_trial_id: str) -> dict:
    answer = post(
        master,
        "/unmanaged/runs",
        token=master.token,
        json={
            "name": "audit",
            "external_experiment_id": "audit",
            "external_trial_id": external_trial_id,
        },
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.parametrize("time_text", ["NaN", "Infinity", "-Infinity", "1e308", "-1e308", "1e400"])
def test_a_log_line_with_an_impossible_time_is_refused_and_the_logs_stay_readable(
    master, time_text
):
    run = open_run(master, f"bad-time-{time_text}")
    trial_id = run["trial_id"]
    good = post(
        master,
        f"/unmanaged/trials/{trial_id}/logs",
        token=run["token"],
        json={"logs": [{"line": "epoch 1", "time": 1_700_000_000.5}]},
    )
    assert good.status_code == 200 and good.json() == {"accepted": 1}

    bad = post(
        master,
        f"/unmanaged/trials/{trial_id}/logs",
        token=run["token"],
        data='{"logs": [{"line": "ok"}, {"line": "when?", "time": ' + time_text + "}]}",
    )
    assert bad.status_code == 400, bad.text
    message = bad.json()["message"]
    assert "logs[1].time" in message and "seconds since the epoch" in message

    # Nothing of the refused batch was stored, and the trial's logs still read.
    logs = requests.get(
        f"{master.url}/api/v1/trials/{trial_id}/logs",
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=30,
    )
    assert logs.status_code == 200, logs.text
    lines = [entry["line"] for entry in logs.json()["logs"]]
    assert "epoch 1" in lines and "ok" not in lines and "when?" not in lines


@pytest.mark.parametrize("lease", [0, 0.0, 0.1, -5, 86401])
def test_a_lease_out_of_range_is_refused_not_replaced_by_the_default(master, lease):
    answer = post(
        master,
        "/unmanaged/runs",
        token=master.token,
        json={
            "external_experiment_id": "lease",
            "external_trial_id": f"l{lease}",
            "lease_seconds": lease,
        },
    )
    assert answer.status_code == 400, answer.text
    assert "lease_seconds" in answer.json()["message"]
    assert "out of range" in answer.json()["message"]
