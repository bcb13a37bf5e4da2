"""`checkpoint_storage: {type: gcs}` end to end: a real master, a real trial and a Google Cloud
Storage emulator (reached through STORAGE_EMULATOR_HOST, on the master and in the trial's
`environment_variables`, as Application Default Credentials would be on a cluster).
Checkpoints go to the bucket only (nothing under the master's root dir), a paused trial resumes
from the bucket, the SDK and `det checkpoint download` fetch one, and the GC and the
experiment's deletion remove exactly the objects of the deleted checkpoints."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import uuid

import pytest

from determined.experimental import Determined
from tests._support import (
    TERMINAL_EXPERIMENT_STATES,
    MasterProcess,
    context_tarball,
    trials,
    wait_for_experiment,
    wait_until,
)
from tests._support.process import child_env

pytestmark = pytest.mark.slow

# Saves a checkpoint each step (its state: the step), resumes from the latest one, and waits at
# step `gate_step` until the file `gate` exists (or it is preempted).
SCRIPT = """
import os, time
import determined as det

info = det.get_cluster_info()
hp = info.trial.hparams
with det.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = int((path / "state").read_text())
            print("resumed from", info.latest_checkpoint, "at step", step)
    while step < hp["steps"]:
        if step == hp["gate_step"]:
            while not os.path.exists(hp["gate"]):
                if core.preempt.should_preempt():
                    raise SystemExit(0)
                time.sleep(0.05)
        step += 1
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
            (path / "state").write_text(str(step))
            (path / "sub").mkdir()
            (path / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 40)
    core.train.report_validation_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory, gcs_server):
    with MasterProcess(tmp_path_factory.mktemp("gcs-master"), env=gcs_server.env) as process:
        yield process


def _logs(master: MasterProcess, exp_id: int) -> str:
    return "\n".join(line for t in trials(master.session, exp_id) for line in master.logs(t["id"]))


def _checkpoints(master: MasterProcess, exp_id: int) -> list[dict]:
    found = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    return sorted(found, key=lambda c: c["steps_completed"])


def test_checkpoints_live_in_the_bucket_through_pause_resume_download_and_gc(
    master, gcs_server, tmp_path
):
    bucket = f"ck-{uuid.uuid4().hex[:10]}"
    gcs_server.create_bucket(bucket)
    gate = tmp_path / "gate"
    config = {
        "name": "gcs-checkpoints",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 4}},
        "hyperparameters": {"steps": 4, "gate_step": 2, "gate": str(gate)},
        "max_restarts": 0,
        "environment": {
            "environment_variables": [f"{k}={v}" for k, v in gcs_server.env.items()],
        },
        "checkpoint_storage": gcs_server.storage_config(
            bucket,
            prefix="team/exps",
            save_experiment_best=0,
            save_trial_best=0,
            save_trial_latest=1,
        ),
    }
    exp_id = master.create_experiment(config, context_tarball({"train.py": SCRIPT}))
    wait_until(
        lambda: len(_checkpoints(master, exp_id)) >= 2,
        60,
        "two checkpoints",
        details=lambda: _logs(master, exp_id),
    )
    master.session.post(f"/experiments/{exp_id}/pause")
    paused = wait_for_experiment(master, exp_id, {"PAUSED"} | TERMINAL_EXPERIMENT_STATES)
    assert paused["state"] == "PAUSED", _logs(master, exp_id)
    saved = _checkpoints(master, exp_id)
    assert [c["steps_completed"] for c in saved] == [1, 2]
    assert gcs_server.checkpoint_uuids(bucket, "team/exps") == {c["uuid"] for c in saved}
    assert saved[-1]["path"] == f"gs://{bucket}/team/exps/{saved[-1]['uuid']}"
    assert set(saved[-1]["resources"]) == {"metadata.json", "state", "sub/", "sub/weights.bin"}

    # Resumed from the bucket: steps 3 and 4, no step reported twice.
    gate.write_text("open")
    master.session.post(f"/experiments/{exp_id}/activate")
    done = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    logs = _logs(master, exp_id)
    assert done["state"] == "COMPLETED", logs
    assert f"resumed from {saved[-1]['uuid']} at step 2" in logs
    (trial,) = trials(master.session, exp_id)
    reports = master.session.get(f"/trials/{trial['id']}/metrics", {"group": "training"})
    assert [r["steps_completed"] for r in reports["metrics"]] == [1, 2, 3, 4]

    # GC (save_trial_latest: 1): exactly the objects of the deleted checkpoints are gone.
    def collected() -> list[dict] | None:
        rows = _checkpoints(master, exp_id)
        return rows if sum(c["state"] == "DELETED" for c in rows) == 3 else None

    rows = wait_until(
        collected, 60, "the checkpoint GC", details=lambda: str(_checkpoints(master, exp_id))
    )
    latest = rows[-1]
    assert latest["state"] == "COMPLETED" and latest["steps_completed"] == 4
    assert gcs_server.checkpoint_uuids(bucket, "team/exps") == {latest["uuid"]}

    # The SDK's download (through the master, from the bucket).
    sdk = Determined(master.url, token=master.token).get_checkpoint(latest["uuid"])
    target = pathlib.Path(sdk.download(str(tmp_path / "sdk")))
    assert (target / "state").read_text() == "4"
    assert (target / "sub" / "weights.bin").read_bytes() == bytes(range(256)) * 40
    cli = subprocess.run(
        [sys.executable, "-m", "determined.cli", "checkpoint", "download", latest["uuid"]]
        + ["-o", str(tmp_path / "cli")],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "cli" / "state").read_text() == "4"

    # Nothing of any checkpoint under the master's root dir.
    uuids = {c["uuid"] for c in rows}
    assert not [p for p in master.root_dir.rglob("*") if p.name in uuids]

    # Deleting the experiment deletes its last checkpoint's objects.
    master.session.delete(f"/experiments/{exp_id}")
    assert gcs_server.checkpoint_uuids(bucket, "team/exps") == set()


def test_a_missing_bucket_fails_the_trial_naming_it(master, gcs_server):
    config = {
        "name": "gcs-no-bucket",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        "hyperparameters": {"steps": 1, "gate_step": -1, "gate": "/nonexistent"},
        "max_restarts": 0,
        "environment": {
            "environment_variables": [f"{k}={v}" for k, v in gcs_server.env.items()],
        },
        "checkpoint_storage": gcs_server.storage_config("no-such-bucket-here"),
    }
    exp_id = master.create_experiment(config, context_tarball({"train.py": SCRIPT}))
    done = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    logs = _logs(master, exp_id)
    assert done["state"] == "ERROR", logs
    assert "bucket 'no-such-bucket-here'" in logs and "create the bucket" in logs, logs
