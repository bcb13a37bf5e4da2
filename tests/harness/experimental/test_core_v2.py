"""`det.experimental.core_v2` in this process against a real master subprocess: metrics,
checkpoints and printed lines arrive; close ends the run; the same external ids resume it."""

from __future__ import annotations

import json
import pathlib

import pytest

from determined.common.experimental import Determined
from determined.core._spool import ReportSpool
from determined.experimental import core_v2
from tests._support import MasterProcess


@pytest.fixture
def master(tmp_path):
    # The runs keep checkpoints in tmp_path/ckpts: the master must allow it (issue 26).
    allowed = {"MASTER_LITE_CHECKPOINT_STORAGE_ROOTS": str(tmp_path)}
    with MasterProcess(tmp_path / "root", env=allowed) as process:
        yield process


@pytest.fixture(autouse=True)
def closed_after():
    yield
    core_v2.close()


def config(**overrides) -> core_v2.Config:
    values = {
        "name": "kernel-run",
        "hparams": {"lr": 0.1},
        "searcher": {"metric": "loss", "smaller_is_better": True},
        "external_experiment_id": "exp-1",
        "external_trial_id": "trial-1",
    }
    return core_v2.Config(**{**values, **overrides})


@pytest.mark.slow
def test_a_run_reports_metrics_checkpoints_and_logs_then_closes_completed(master, tmp_path):
    client = Determined(master.url, token=master.token)
    core_v2.init(config=config(), client=client, checkpoint_storage=str(tmp_path / "ckpts"))
    info = core_v2.info
    trial_id = info.trial.trial_id
    assert info.trial.hparams == {"lr": 0.1} and info.latest_checkpoint is None
    for step in (1, 2, 3):
        core_v2.train.report_training_metrics(step, {"loss": 1 / step})
    core_v2.train.report_validation_metrics(3, {"loss": 0.25})
    with core_v2.checkpoint.store_path({"steps_completed": 3}) as (path, uuid):
        (path / "weights.txt").write_text("w=3")
    print("epoch 3 done")
    experiment = master.session.get(f"/experiments/{info.trial.experiment_id}")["experiment"]
    assert experiment["unmanaged"] is True and experiment["state"] == "ACTIVE"
    assert master.session.get(f"/trials/{trial_id}")["trial"]["run_state"] == "RUNNING"
    core_v2.close()

    trial = master.session.get(f"/trials/{trial_id}")["trial"]
    assert trial["state"] == "COMPLETED"
    assert trial["latest_checkpoint"] == uuid
    assert master.series(trial_id, "training") == [
        (1, {"loss": 1.0}),
        (2, {"loss": 0.5}),
        (3, {"loss": 1 / 3}),
    ]
    assert master.series(trial_id, "validation") == [(3, {"loss": 0.25})]
    assert (tmp_path / "ckpts" / uuid / "weights.txt").read_text() == "w=3"
    assert "epoch 3 done" in master.logs(trial_id)
    experiment = master.session.get(f"/experiments/{info.trial.experiment_id}")["experiment"]
    assert experiment["state"] == "COMPLETED"

    # After close: a clear error, and nothing stored changes.
    with pytest.raises(core_v2.RunEnded, match="the run was closed"):
        core_v2.train.report_training_metrics(4, {"loss": 0.1})
    assert len(master.series(trial_id, "training")) == 3


@pytest.mark.slow
def test_tensorboard_files_reach_checkpoint_storage_by_default(master, tmp_path):
    # Determined's default (AUTO): what the run writes to its TensorBoard path is stored with
    # its checkpoints, where the master's TensorBoards read it, without an upload call.
    client = Determined(master.url, token=master.token)
    core_v2.init(config=config(), client=client, checkpoint_storage=str(tmp_path / "ckpts"))
    info = core_v2.info
    events = core_v2.train.get_tensorboard_path() / "events.out.tfevents.1"
    events.parent.mkdir(parents=True, exist_ok=True)
    events.write_bytes(b"an event")
    core_v2.train.report_training_metrics(1, {"loss": 1.0})
    core_v2.close()
    stored = (
        tmp_path / "ckpts" / "tensorboard" / "experiment" / str(info.trial.experiment_id)
        / "trial" / str(info.trial.trial_id) / "events.out.tfevents.1"
    )  # fmt: skip
    assert stored.read_bytes() == b"an event"


@pytest.mark.slow
def test_a_kept_context_refuses_reports_after_close(master):
    client = Determined(master.url, token=master.token)
    core_v2.init(config=config(), client=client, capture_output=False)
    train = core_v2.train
    core_v2.close()
    with pytest.raises(core_v2.RunEnded, match="call core_v2.init"):
        train.report_training_metrics(1, {"loss": 1.0})


@pytest.mark.slow
def test_the_same_external_ids_resume_the_trial_from_its_checkpoint(master, tmp_path):
    client = Determined(master.url, token=master.token)
    core_v2.init(config=config(), client=client, capture_output=False)
    first = core_v2.info
    uuid = core_v2.checkpoint.upload(_checkpoint_dir(tmp_path, "step-5"), {"steps_completed": 5})
    core_v2.train.report_training_metrics(5, {"loss": 0.5})
    core_v2.close()

    core_v2.init(config=config(hparams={"lr": 9}), client=client, capture_output=False)
    again = core_v2.info
    assert again.trial.trial_id == first.trial.trial_id
    assert again.trial.experiment_id == first.trial.experiment_id
    assert again.latest_checkpoint == uuid
    assert again.trial.hparams == {"lr": 0.1}
    assert again.trial._steps_completed == 5
    core_v2.checkpoint.download(uuid, tmp_path / "restored")
    assert (tmp_path / "restored" / "state.txt").read_text() == "step-5"
    core_v2.train.report_training_metrics(6, {"loss": 0.4})
    core_v2.close()
    assert [step for step, _ in master.series(first.trial.trial_id, "training")] == [5, 6]
    trial = master.session.get(f"/trials/{first.trial.trial_id}")["trial"]
    assert trial["state"] == "COMPLETED" and trial["run_id"] == 2


@pytest.mark.slow
def test_an_invalid_config_is_refused_naming_the_field(master):
    client = Determined(master.url, token=master.token)
    with pytest.raises(Exception, match="checkpoint_storage.type"):
        core_v2.init(
            config=config(checkpoint_storage={"type": "azure", "container": "c"}), client=client
        )
    with pytest.raises(ValueError, match="external_trial_id needs external_experiment_id"):
        core_v2.init(config=config(external_experiment_id=None), client=client)
    assert master.session.get("/experiments")["experiments"] == []


def _checkpoint_dir(tmp_path: pathlib.Path, content: str) -> pathlib.Path:
    directory = tmp_path / f"src-{content}"
    directory.mkdir()
    (directory / "state.txt").write_text(content)
    return directory


def test_core_v2_is_reachable_as_an_attribute_like_determineds() -> None:
    import determined as det

    assert det.experimental.core_v2 is core_v2


@pytest.mark.slow
def test_many_long_lines_reach_the_master_within_its_log_limits(master):
    """A kernel printing 10 MB of long lines: every line arrives (the shipper splits its POSTs
    under the master's body limit), a line over the limit arrives cut, with a marker."""
    from determined.experimental.core_v2._run import MAX_LINE_CHARS
    from tests._support.master import trial_logs

    client = Determined(master.url, token=master.token)
    core_v2.init(config=config(external_trial_id="long-lines"), client=client)
    trial_id = core_v2.info.trial.trial_id
    for index in range(200):
        print(f"{index:04d} " + "y" * 50_000)
    print("z" * 200_000)
    core_v2.close()
    lines = [entry["line"] for entry in trial_logs(master, trial_id, stream="stdout")]
    assert [line[:4] for line in lines[:200]] == [f"{index:04d}" for index in range(200)]
    assert all(len(line) == 50_005 for line in lines[:200])
    assert lines[200] == "z" * MAX_LINE_CHARS + (
        f" [line truncated: 200000 characters, over the {MAX_LINE_CHARS}-character limit "
        "of a log line]"
    )


@pytest.mark.slow
def test_reports_an_earlier_process_kept_are_sent_when_the_run_opens_again(
    master, tmp_path, monkeypatch
):
    # Issue 26 row 12: a process whose master stayed down past its lease leaves its reports in
    # a spool file; opening the run again with the same external ids sends them first.
    monkeypatch.setenv("DET_REPORT_SPOOL_DIR", str(tmp_path / "spool"))
    client = Determined(master.url, token=master.token)
    core_v2.init(config=config(), client=client, capture_output=False)
    trial_id = core_v2.info.trial.trial_id
    core_v2.train.report_training_metrics(1, {"loss": 1.0})
    core_v2.close()
    kept = ReportSpool(tmp_path / "spool", master.url, trial_id)
    report = {
        "group": "training",
        "steps_completed": 2,
        "metrics": {"loss": 0.5},
        "trial_run_id": 1,
        "report_time": "2026-01-01T00:00:00.000Z",
    }
    kept.append(f"/trials/{trial_id}/metrics", json.dumps({"reports": [report]}).encode())
    assert kept.path is not None and kept.path.exists()

    core_v2.init(config=config(), client=client, capture_output=False)
    assert not kept.path.exists()
    core_v2.train.report_training_metrics(3, {"loss": 0.25})
    core_v2.close()
    assert [step for step, _ in master.series(trial_id, "training")] == [1, 2, 3]


@pytest.mark.slow
def test_a_run_goes_into_the_workspace_and_project_its_config_names(master):
    """Determined's `Config(workspace=..., project=...)` places the run's experiment
    (docs/team.md, "Workspaces and projects")."""
    client = Determined(master.url, token=master.token)
    client.create_workspace("kernels").create_project("notebooks")
    core_v2.init(
        config=config(workspace="kernels", project="notebooks", external_trial_id="placed"),
        client=client,
        capture_output=False,
    )
    experiment_id = core_v2.info.trial.experiment_id
    core_v2.close()
    experiment = client.get_experiment(experiment_id)
    assert experiment.project_id == client.get_workspace("kernels").get_project("notebooks").id


@pytest.mark.slow
def test_an_unmanaged_run_checkpoints_to_s3_with_its_own_keys(master, s3_server):
    """The master's answer shows the storage's keys as stars: the run signs with the keys it
    submitted, and its checkpoint's objects are in the bucket."""
    s3_server.create_bucket("unmanaged")
    client = Determined(master.url, token=master.token)
    storage = s3_server.storage_config("unmanaged", prefix="nb")
    core_v2.init(config=config(), client=client, checkpoint_storage=storage)
    with core_v2.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "weights.txt").write_text("w=1")
    core_v2.close()
    assert s3_server.keys("unmanaged", f"nb/{uuid}") == [
        f"nb/{uuid}/metadata.json",
        f"nb/{uuid}/weights.txt",
    ]
    answer = json.dumps(master.session.get(f"/checkpoints/{uuid}"))
    assert s3_server.secret_key not in answer
