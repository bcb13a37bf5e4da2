"""The job queue on a real master with a fake 1-GPU inventory and real trial processes (issue
30): a user moves their second job ahead of their first with `det job update --ahead-of`,
`det job list` shows it ahead (`name (id)`, the user), and when the GPU comes free it is the
moved job that starts first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from determined.common.api import Session
from tests._support import child_env
from tests._support.master import submit, trials
from tests._support.waiting import wait_until

pytestmark = pytest.mark.slow

# Starts, then waits for its gate file before it reports and completes.
GATED = """
import pathlib, time
import determined as det

info = det.get_cluster_info()
gate = pathlib.Path(info.user_data["gate"])
with det.core.init() as core:
    while not gate.exists():
        time.sleep(0.05)
    for op in core.searcher.operations():
        core.train.report_validation_metrics(steps_completed=1, metrics={"loss": 1.0})
        op.report_completed(1.0)
"""


def gated(name: str, gate: Path) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "data": {"gate": str(gate)},
        "resources": {"slots_per_trial": 1},
    }


def det(master, token: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": token}),
        capture_output=True,
        text=True,
        timeout=60,
    )


def run_state(master, exp_id: int) -> str | None:
    [trial] = trials(master, exp_id) or [{}]
    return trial.get("run_state")


def test_a_job_moved_ahead_starts_first_and_det_job_list_shows_it(start_master, tmp_path):
    master = start_master(
        cpu_slots=None,
        extra_args=["--scheduler", "priority"],
        env={"MASTER_LITE_FAKE_GPUS": "1"},
    )
    master.session.post(
        "/users", {"user": {"username": "jq_carol", "admin": False}, "password": "Pw-carol-123"}
    )
    token = master.session.post(
        "/auth/login", {"username": "jq_carol", "password": "Pw-carol-123"}
    )["token"]
    carol = Session(master.url, token)
    blocker_gate, gate = tmp_path / "blocker-gate", tmp_path / "gate"
    blocker = submit(master, gated("blocker", blocker_gate), {"train.py": GATED})
    wait_until(lambda: run_state(master, blocker) == "RUNNING", what="the blocker to run")
    first = submit(carol, gated("first", gate), {"train.py": GATED})
    second = submit(carol, gated("second", gate), {"train.py": GATED})
    wait_until(
        lambda: len(master.session.get("/job-queues")["jobs"]) == 3, what="3 jobs in the queue"
    )

    moved = det(master, token, "job", "update", f"exp-{second}", "--ahead-of", f"exp-{first}")
    assert moved.returncode == 0, moved.stderr
    listing = det(master, token, "job", "list")
    assert listing.returncode == 0, listing.stderr
    rows = [[cell.strip() for cell in line.split("|")] for line in listing.stdout.splitlines()]
    header, body = rows[0], [row for row in rows[2:] if len(row) == len(rows[0])]
    assert header[:4] == ["#", "ID", "Type", "Job Name"] and header[-1] == "User"
    assert [(row[0], row[1], row[3]) for row in body] == [
        ("0", f"exp-{blocker}", f"blocker ({blocker})"),
        ("1", f"exp-{second}", f"second ({second})"),
        ("2", f"exp-{first}", f"first ({first})"),
    ]
    assert [row[-1] for row in body[1:]] == ["jq_carol", "jq_carol"]
    assert body[0][-3:-1] == ["1/1", "STATE_SCHEDULED"] and body[1][-2] == "STATE_QUEUED"

    # The GPU comes free: the moved job starts, the other still waits behind it.
    blocker_gate.touch()
    wait_until(lambda: run_state(master, second) == "RUNNING", what="the moved job to start")
    assert run_state(master, first) == "QUEUED"
    gate.touch()
    wait_until(
        lambda: master.session.get(f"/experiments/{first}")["experiment"]["state"] == "COMPLETED",
        timeout=60,
        what="the first job to complete after the moved one",
    )
    assert master.session.get("/job-queues")["jobs"] == []  # finished jobs leave the queue
