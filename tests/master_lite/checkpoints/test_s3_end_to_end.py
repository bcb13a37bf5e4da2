"""`checkpoint_storage: {type: s3}` end to end: a real master, real trials and an S3-compatible
server (moto's server mode). Checkpoints go to the bucket only (nothing under the master's root
dir), a paused trial resumes from the bucket, the SDK and `det checkpoint download` fetch them,
the GC and deletions remove exactly their objects, a missing bucket is a clear error, and the
keys never show in argv, logs or API answers."""

from __future__ import annotations

import json
import os
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
# step `gate_step` until the file `gate` exists (or it is preempted), so a test can pause it
# there.
SCRIPT = """
import os, pathlib, time
import determined as det

info = det.get_cluster_info()
hp = info.trial.hparams
with det.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = int((path / "state").read_text())
            print("resumed from", info.latest_checkpoint, "at step", step, "in", path)
    while step < hp["steps"]:
        if step == hp["gate_step"]:
            while not os.path.exists(hp["gate"]):
                if core.preempt.should_preempt():
                    print("preempted at", step)
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
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("s3-master")) as process:
        yield process


def _config(s3_server, bucket: str, gate: pathlib.Path, **storage) -> dict:
    return {
        "name": "s3-checkpoints",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 5}},
        "hyperparameters": {"steps": 5, "gate_step": 3, "gate": str(gate)},
        "max_restarts": 0,
        "checkpoint_storage": s3_server.storage_config(
            bucket,
            prefix="team/exps",
            save_experiment_best=0,
            save_trial_best=0,
            save_trial_latest=1,
            **storage,
        ),
    }


def _logs(master: MasterProcess, exp_id: int) -> str:
    lines = []
    for trial in trials(master.session, exp_id):
        lines += master.logs(trial["id"])
    return "\n".join(lines)


def _checkpoints(master: MasterProcess, exp_id: int) -> list[dict]:
    found = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    return sorted(found, key=lambda c: c["steps_completed"])


def _cmdlines() -> str:
    texts = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                texts.append((entry / "cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                continue
    return "\n".join(texts)


def _det(master: MasterProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_checkpoints_live_in_the_bucket_through_pause_resume_download_gc_and_delete(
    master, s3_server, tmp_path
):
    bucket = f"ck-{uuid.uuid4().hex[:10]}"
    s3_server.create_bucket(bucket)
    gate = tmp_path / "gate"
    exp_id = master.create_experiment(
        _config(s3_server, bucket, gate), context_tarball({"train.py": SCRIPT})
    )
    # Paused at the gate (step 3), with three checkpoints in the bucket.
    wait_until(
        lambda: len(_checkpoints(master, exp_id)) >= 3,
        120,
        "three checkpoints",
        details=lambda: _logs(master, exp_id),
    )
    secrets = (s3_server.secret_key, s3_server.access_key)
    for secret in secrets:  # a trial is running now: no process has the keys in its argv
        assert secret not in _cmdlines()
    master.session.post(f"/experiments/{exp_id}/pause")
    paused = wait_for_experiment(master, exp_id, {"PAUSED"} | TERMINAL_EXPERIMENT_STATES)
    assert paused["state"] == "PAUSED", _logs(master, exp_id)
    saved = _checkpoints(master, exp_id)
    assert [c["steps_completed"] for c in saved] == [1, 2, 3]
    assert s3_server.checkpoint_uuids(bucket, "team/exps") == {c["uuid"] for c in saved}
    assert saved[-1]["path"] == f"s3://{bucket}/team/exps/{saved[-1]['uuid']}"
    resources = saved[-1]["resources"]
    assert set(resources) == {"metadata.json", "state", "sub/", "sub/weights.bin"}
    assert resources["sub/weights.bin"] == 10240 and resources["state"] == 1
    # Nothing local: the master's own checkpoint directory holds no checkpoint.
    local = master.root_dir / "checkpoints"
    assert not local.exists() or not [p for p in local.rglob("*") if p.name == saved[-1]["uuid"]]

    # Resumed from the bucket (the gate is open now): steps 4 and 5, no step reported twice.
    gate.write_text("open")
    master.session.post(f"/experiments/{exp_id}/activate")
    done = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    logs = _logs(master, exp_id)
    assert done["state"] == "COMPLETED", logs
    assert f"resumed from {saved[-1]['uuid']} at step 3" in logs
    (trial,) = trials(master.session, exp_id)
    reports = master.session.get(f"/trials/{trial['id']}/metrics", {"group": "training"})
    steps = [r["steps_completed"] for r in reports["metrics"]]
    assert steps == [1, 2, 3, 4, 5]

    # GC (save_trial_latest: 1): exactly the objects of the deleted checkpoints are gone.
    def collected() -> list[dict] | None:
        rows = _checkpoints(master, exp_id)
        return rows if sum(c["state"] == "DELETED" for c in rows) == 4 else None

    rows = wait_until(
        collected, 60, "the checkpoint GC", details=lambda: str(_checkpoints(master, exp_id))
    )
    latest = rows[-1]
    assert latest["state"] == "COMPLETED" and latest["steps_completed"] == 5
    assert s3_server.checkpoint_uuids(bucket, "team/exps") == {latest["uuid"]}

    # The SDK's download (through the master) and `det checkpoint download`.
    sdk = Determined(master.url, token=master.token).get_checkpoint(latest["uuid"])
    target = pathlib.Path(sdk.download(str(tmp_path / "sdk")))
    assert (target / "state").read_text() == "5"
    assert (target / "sub" / "weights.bin").read_bytes() == bytes(range(256)) * 40
    cli = _det(master, "checkpoint", "download", latest["uuid"], "-o", str(tmp_path / "cli"))
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "cli" / "state").read_text() == "5"

    # Secrets: never in the API's answers, the trial's logs or the master's log.
    answers = json.dumps(
        [
            master.session.get(f"/experiments/{exp_id}"),
            master.session.get(f"/experiments/{exp_id}/checkpoints"),
            master.session.get(f"/checkpoints/{latest['uuid']}"),
            master.session.get(f"/trials/{trial['id']}"),
        ]
    )
    assert '"secret_key": "********"' in answers and '"access_key": "********"' in answers
    master_log = (master.root_dir / "master.log").read_text(errors="replace")
    for secret in secrets:
        assert secret not in answers
        assert secret not in logs
        assert secret not in master_log
        assert secret not in cli.stdout + cli.stderr

    # Deleting the experiment deletes its last checkpoint's objects.
    master.session.delete(f"/experiments/{exp_id}")
    assert s3_server.checkpoint_uuids(bucket, "team/exps") == set()


def test_a_user_deletes_one_checkpoint_from_the_bucket(master, s3_server, tmp_path):
    bucket = f"ck-{uuid.uuid4().hex[:10]}"
    s3_server.create_bucket(bucket)
    gate = tmp_path / "gate"
    gate.write_text("open")
    config = _config(s3_server, bucket, gate)
    config["checkpoint_storage"].update(save_trial_latest=5)
    exp_id = master.create_experiment(config, context_tarball({"train.py": SCRIPT}))
    done = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    assert done["state"] == "COMPLETED", _logs(master, exp_id)
    saved = _checkpoints(master, exp_id)
    assert len(saved) == 5
    first = saved[0]["uuid"]
    master.session.delete(f"/checkpoints/{first}")
    assert s3_server.checkpoint_uuids(bucket, "team/exps") == {c["uuid"] for c in saved[1:]}
    assert master.session.get(f"/checkpoints/{first}")["checkpoint"]["state"] == "DELETED"


def test_a_missing_bucket_fails_the_trial_naming_it(master, s3_server, tmp_path):
    gate = tmp_path / "gate"
    gate.write_text("open")
    exp_id = master.create_experiment(
        _config(s3_server, "no-such-bucket-here", gate), context_tarball({"train.py": SCRIPT})
    )
    done = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    logs = _logs(master, exp_id)
    assert done["state"] == "ERROR", logs
    assert "bucket 'no-such-bucket-here'" in logs and "NoSuchBucket" in logs, logs
    for secret in (s3_server.secret_key, s3_server.access_key):
        assert secret not in logs


def test_config_errors_are_refused_naming_the_key(master, s3_server, tmp_path):
    from determined.common.api import errors

    config = _config(s3_server, "b", tmp_path / "gate")
    del config["checkpoint_storage"]["bucket"]
    with pytest.raises(errors.APIException) as info:
        master.create_experiment(config, context_tarball({"train.py": SCRIPT}))
    assert "checkpoint_storage.bucket: required" in str(info.value)
    config = _config(s3_server, "b", tmp_path / "gate")
    config["checkpoint_storage"] = {"type": "azure", "container": "c"}
    with pytest.raises(errors.APIException) as info:
        master.create_experiment(config, context_tarball({"train.py": SCRIPT}))
    assert "'azure' is not supported by master_lite: use s3" in str(info.value)
    assert "gcs (Google Cloud Storage)" in str(info.value)
    assert os.environ.get("DET_CHECKPOINT_STORAGE_CREDENTIALS") is None
