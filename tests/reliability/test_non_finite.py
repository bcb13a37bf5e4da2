"""A diverging run (issue 26, row 3): a trial reports NaN and ±Infinity as training and
validation metrics to a real master.

* Every JSON answer that holds them — the experiment list and object, trials, metric lists
  (plain and downsampled), the searcher's best metric and the /events stream — parses with a
  strict parser (RFC 8259: `json.loads` with a `parse_constant` that raises), and carries them
  as the strings "NaN", "Infinity", "-Infinity" (Determined's API form).
* `best_validation` (experiment and trial) and the best-first trial order skip them: the best is
  the finite 0.5, never NaN nor -Infinity.
* The SDK (`determined.common.api.Session`) reads them back as floats.
* Where a non-finite number means nothing (`resources.weight`, model metadata), 400 names the
  field and nothing is stored.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import pytest
import requests

from tests._support import MasterProcess, context_tarball, wait_for_experiment, wait_until

pytestmark = pytest.mark.slow

# Validation loss: NaN, -Infinity, 0.5, Infinity (the best is 0.5); training loss diverges.
DIVERGING_PY = """
import determined as det

VALIDATION = [float("nan"), float("-inf"), 0.5, float("inf")]
TRAINING = [1.0, float("nan"), float("inf"), float("-inf")]
with det.core.init() as core:
    for op in core.searcher.operations():
        for step in range(1, 5):
            core.train.report_training_metrics(
                steps_completed=step, metrics={"loss": TRAINING[step - 1], "lr": 0.1}
            )
            core.train.report_validation_metrics(
                steps_completed=step, metrics={"loss": VALIDATION[step - 1]}
            )
        op.report_completed(float("nan"))
"""


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"non-standard JSON token {token!r} (NaN/Infinity are not JSON)")


def strict_loads(text: str) -> Any:
    """`json.loads` as a browser's `JSON.parse`: bare NaN/Infinity tokens are an error."""
    return json.loads(text, parse_constant=_refuse_constant)


def _strict_get(master: MasterProcess, path: str, **params: Any) -> Any:
    response = requests.get(
        f"{master.url}/api/v1{path}",
        params=params,
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=30,
    )
    assert response.status_code == 200, (path, response.status_code, response.text)
    return strict_loads(response.text)


def _events(
    master: MasterProcess, seen: list[str], connected: threading.Event, stop: threading.Event
) -> None:
    """Collect the /events stream's data lines until `stop` (checked at each line); `connected`
    is set at the stream's first line (": connected", sent once it is subscribed)."""
    try:
        with requests.get(
            f"{master.url}/api/v1/events",
            headers={"Authorization": f"Bearer {master.token}"},
            stream=True,
            timeout=(10, 60),
        ) as response:
            for line in response.iter_lines(decode_unicode=True):
                connected.set()
                if line and line.startswith("data:"):
                    seen.append(line[len("data:") :].strip())
                if stop.is_set():
                    return
    except requests.RequestException:
        return  # the master stopped (end of the module) while the stream was open


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory):
    with MasterProcess(tmp_path_factory.mktemp("non-finite") / "root", cpu_slots=1) as running:
        yield running


@pytest.fixture(scope="module")
def diverged(master: MasterProcess) -> dict:
    """The finished diverging experiment, and the /events data lines heard while it ran."""
    seen: list[str] = []
    connected, stop = threading.Event(), threading.Event()
    listener = threading.Thread(target=_events, args=(master, seen, connected, stop), daemon=True)
    listener.start()
    assert connected.wait(30), "the /events stream did not open"
    config = {
        "name": "diverging",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 4},
    }
    exp_id = master.create_experiment(config, context_tarball({"train.py": DIVERGING_PY}))
    experiment = wait_for_experiment(master, exp_id)
    assert experiment["state"] == "COMPLETED", experiment
    trial_id = master.trials(exp_id)[0]["id"]
    # The stream heard the metric reports (published after they were stored).
    wait_until(
        lambda: sum('"loss"' in data and '"group"' in data for data in seen) >= 8,
        60,
        "the 8 metric events",
    )
    stop.set()
    return {"experiment_id": exp_id, "trial_id": trial_id, "events": seen}


def test_every_answer_is_strict_json(master: MasterProcess, diverged: dict) -> None:
    exp_id, trial_id = diverged["experiment_id"], diverged["trial_id"]
    listed = _strict_get(master, "/experiments")["experiments"]
    assert [e["id"] for e in listed if e["id"] == exp_id] == [exp_id]
    _strict_get(master, f"/experiments/{exp_id}")
    _strict_get(master, f"/experiments/{exp_id}/trials")
    _strict_get(master, f"/experiments/{exp_id}/trials", order_by="best")
    _strict_get(master, f"/trials/{trial_id}")
    _strict_get(master, f"/experiments/{exp_id}/searcher/best_searcher_validation_metric")
    for params in ({}, {"group": "validation"}, {"max_datapoints": 2}):
        _strict_get(master, f"/experiments/{exp_id}/metrics", **params)
    validation = _strict_get(master, f"/trials/{trial_id}/metrics", group="validation")
    assert [r["metrics"]["loss"] for r in validation["metrics"]] == [
        "NaN",
        "-Infinity",
        0.5,
        "Infinity",
    ]
    training = _strict_get(master, f"/trials/{trial_id}/metrics", group="training")
    assert [r["metrics"]["loss"] for r in training["metrics"]] == [
        1.0,
        "NaN",
        "Infinity",
        "-Infinity",
    ]
    for data in diverged["events"]:
        strict_loads(data)  # raises on a bare NaN


def test_best_validation_skips_non_finite(master: MasterProcess, diverged: dict) -> None:
    exp_id, trial_id = diverged["experiment_id"], diverged["trial_id"]
    assert _strict_get(master, f"/experiments/{exp_id}")["experiment"]["best_validation"] == 0.5
    listed = _strict_get(master, "/experiments")["experiments"]
    assert [e["best_validation"] for e in listed if e["id"] == exp_id] == [0.5]
    trial = _strict_get(master, f"/trials/{trial_id}")
    trial = trial.get("trial", trial)
    assert trial["best_validation"]["metrics"] == {"loss": 0.5}
    assert trial["best_validation"]["steps_completed"] == 3
    best = _strict_get(master, f"/experiments/{exp_id}/searcher/best_searcher_validation_metric")
    assert best == {"metric": 0.5}


def test_sdk_reads_them_back_as_floats(master: MasterProcess, diverged: dict) -> None:
    reports = master.session.get(
        f"/trials/{diverged['trial_id']}/metrics", {"group": "validation"}
    )["metrics"]
    losses = [r["metrics"]["loss"] for r in reports]
    assert math.isnan(losses[0])
    assert losses[1:] == [-math.inf, 0.5, math.inf]


def test_meaningless_non_finite_input_is_refused(master: MasterProcess, diverged: dict) -> None:
    exp_id = diverged["experiment_id"]
    headers = {"Authorization": f"Bearer {master.token}", "Content-Type": "application/json"}
    before = master.session.get(f"/experiments/{exp_id}")["experiment"]["config"]["resources"]
    for text in ("NaN", "Infinity", "1e400"):
        response = requests.patch(
            f"{master.url}/api/v1/experiments/{exp_id}",
            data='{"resources": {"weight": ' + text + "}}",
            headers=headers,
            timeout=30,
        )
        assert response.status_code == 400, (text, response.text)
        assert "resources.weight" in strict_loads(response.text)["message"]
    after = master.session.get(f"/experiments/{exp_id}")["experiment"]["config"]["resources"]
    assert after == before
    response = requests.post(
        f"{master.url}/api/v1/models",
        data='{"name": "nan-model", "metadata": {"scores": [1, NaN]}}',
        headers=headers,
        timeout=30,
    )
    assert response.status_code == 400, response.text
    assert "metadata.scores[1]" in strict_loads(response.text)["message"]
    assert master.session.get("/models")["models"] == []
