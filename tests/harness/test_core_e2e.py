"""The Core API tutorial end to end: a real master-lite subprocess running real trial processes.

Each stage of examples/core_api is submitted with `POST /api/v1/experiments` (config + base64
context tarball), and the test asserts on what the master stored: metric series, progress,
checkpoints and their files, pause/activate behaviour.
"""
from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from determined.common.api import Session

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAGES = ROOT / "examples" / "core_api"
TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    pytest.importorskip("master_lite._app", reason="master_lite app not available yet")
    root = tmp_path_factory.mktemp("core-e2e-master")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    # The tutorial entrypoints say `python3 N.py`: make that the interpreter running the tests.
    env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")])
    log = open(root / "master.log", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "master_lite", "--port", "0", "--root-dir", str(root)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (root / "master.json").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("master-lite did not start:\n" + (root / "master.log").read_text())
        time.sleep(0.2)
    time.sleep(0.2)
    info = json.loads((root / "master.json").read_text())
    session = Session(info["url"], info["token"])
    yield session
    session.close()
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
    log.close()


def context_tarball() -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(STAGES.iterdir()):
            if path.is_file():
                tar.add(path, arcname=path.name)
    return base64.b64encode(buffer.getvalue()).decode()


def submit(session: Session, config_name: str) -> int:
    body = {"config": (STAGES / config_name).read_text(), "context": context_tarball()}
    return session.post("/experiments", body)["experiment"]["id"]


def wait_for(session: Session, exp_id: int, states: set[str], timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        experiment = session.get(f"/experiments/{exp_id}")["experiment"]
        if experiment["state"] in states:
            return experiment
        if time.monotonic() > deadline:
            pytest.fail(f"experiment {exp_id} still {experiment['state']} after {timeout} s; "
                        f"logs: {trial_logs(session, exp_id)[-3000:]}")
        time.sleep(0.5)


def trials(session: Session, exp_id: int) -> list[dict]:
    return session.get(f"/experiments/{exp_id}/trials")["trials"]


def trial_logs(session: Session, exp_id: int) -> str:
    lines = []
    for trial in trials(session, exp_id):
        lines += [entry["line"] for entry in session.get(f"/trials/{trial['id']}/logs")["logs"]]
    return "\n".join(lines)


def series(session: Session, trial_id: int, group: str) -> list[tuple[int, dict]]:
    reports = session.get(f"/trials/{trial_id}/metrics", {"group": group})["metrics"]
    return [(r["steps_completed"], r["metrics"]) for r in reports]


def checkpoints(session: Session, exp_id: int) -> list[dict]:
    found = session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    return sorted(found, key=lambda c: c["steps_completed"])


def test_stage_0_runs_to_completion(master):
    exp_id = submit(master, "0_start.yaml")
    experiment = wait_for(master, exp_id, TERMINAL)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    assert "x is now 100" in trial_logs(master, exp_id)


def test_stage_1_reports_the_exact_series(master):
    exp_id = submit(master, "1_metrics.yaml")
    experiment = wait_for(master, exp_id, TERMINAL)
    logs = trial_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs
    (trial,) = trials(master, exp_id)
    assert series(master, trial["id"], "training") == [(s, {"x": s}) for s in range(10, 101, 10)]
    assert series(master, trial["id"], "validation") == [(100, {"x": 100})]
    assert trial["progress"] == pytest.approx(1.0)
    for level in ("DEBUG", "INFO", "WARNING", "ERROR"):
        assert f"{level.lower()}-level message" in logs
    assert checkpoints(master, exp_id) == []


def test_stage_2_pause_and_resume_from_the_checkpoint(master):
    exp_id = submit(master, "2_checkpoints.yaml")
    # Pause once the trial has checkpointed at least once (and is still far from done).
    deadline = time.monotonic() + 120
    while not checkpoints(master, exp_id):
        assert time.monotonic() < deadline, trial_logs(master, exp_id)
        time.sleep(0.2)
    master.post(f"/experiments/{exp_id}/pause")
    paused = wait_for(master, exp_id, {"PAUSED"} | TERMINAL)
    assert paused["state"] == "PAUSED", trial_logs(master, exp_id)
    (trial,) = trials(master, exp_id)
    saved = checkpoints(master, exp_id)
    paused_at = saved[-1]["steps_completed"]
    assert paused_at < 100, "the trial finished before the pause reached it; nothing was tested"
    assert trial["latest_checkpoint"] is not None
    assert [s for s, _ in series(master, trial["id"], "training")] == list(range(10, paused_at + 1, 10))
    assert series(master, trial["id"], "validation") == []

    master.post(f"/experiments/{exp_id}/activate")
    experiment = wait_for(master, exp_id, TERMINAL)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    (trial,) = trials(master, exp_id)
    assert trial["run_id"] >= 2
    # Resumed at the same batch: every step reported exactly once, x continued from the checkpoint.
    assert series(master, trial["id"], "training") == [(s, {"x": s}) for s in range(10, 101, 10)]
    assert series(master, trial["id"], "validation") == [(100, {"x": 100})]

    saved = checkpoints(master, exp_id)
    assert [c["steps_completed"] for c in saved] == list(range(10, 101, 10))
    for checkpoint in saved:
        steps = checkpoint["steps_completed"]
        assert checkpoint["metadata"] == {"steps_completed": steps}
        assert set(checkpoint["resources"]) == {"state", "metadata.json"}
        directory = pathlib.Path(checkpoint["path"])
        assert sorted(p.name for p in directory.iterdir()) == ["metadata.json", "state"]
        assert (directory / "state").read_text() == f"{steps},{steps},{trial['id']}"
        assert json.loads((directory / "metadata.json").read_text()) == {"steps_completed": steps}


def check_hpsearch_trial(session: Session, trial: dict) -> list[int]:
    """Every validation is at an op length, with x = length * increment_by; returns the lengths."""
    inc = trial["hparams"]["increment_by"]
    training = series(session, trial["id"], "training")
    steps = [s for s, _ in training]
    assert steps == sorted(set(steps)), f"trial {trial['id']} reported a step twice: {steps}"
    assert all(m == {"x": s * inc} for s, m in training)
    validations = series(session, trial["id"], "validation")
    assert validations, f"trial {trial['id']} never validated"
    assert all(m == {"x": s * inc} for s, m in validations)
    return [s for s, _ in validations]


def test_stage_3_random_search(master):
    exp_id = submit(master, "3_hpsearch_random.yaml")
    experiment = wait_for(master, exp_id, TERMINAL, timeout=300)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    found = trials(master, exp_id)
    assert len(found) == 4
    for trial in found:
        assert trial["state"] == "COMPLETED"
        assert check_hpsearch_trial(master, trial) == [100]
        assert trial["progress"] == pytest.approx(1.0)


def test_stage_3_adaptive_asha(master):
    exp_id = submit(master, "3_hpsearch.yaml")
    experiment = wait_for(master, exp_id, TERMINAL, timeout=400)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    found = trials(master, exp_id)
    assert len(found) == 10
    lengths = [check_hpsearch_trial(master, trial) for trial in found]
    assert all(set(ls) <= {25, 100} for ls in lengths), lengths
    assert any(ls[-1] == 100 for ls in lengths)
    assert any(ls == [25] for ls in lengths), "ASHA stopped no trial at the first rung"
    assert experiment["best_validation"] is not None
