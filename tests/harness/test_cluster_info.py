"""det.get_cluster_info(): ClusterInfo/TrialInfo built from the DET_* environment of a task."""

import json

import pytest

import determined as det
from determined._info import ClusterInfo


def trial_env(**overrides):
    env = {
        "DET_MASTER": "http://127.0.0.1:8080/",
        "DET_SESSION_TOKEN": "trial-token",
        "DET_CLUSTER_ID": "cluster-1",
        "DET_AGENT_ID": "host-a",
        "DET_TASK_TYPE": "TRIAL",
        "DET_TASK_ID": "trial-7",
        "DET_ALLOCATION_ID": "trial-7.2",
        "DET_EXPERIMENT_ID": "3",
        "DET_TRIAL_ID": "7",
        "DET_TRIAL_RUN_ID": "2",
        "DET_TRIAL_SEED": "1234",
        "DET_HPARAMS": json.dumps({"increment_by": 4, "optimizer": {"lr": 0.1}}),
        "DET_EXPERIMENT_CONFIG": json.dumps({"name": "x", "data": {"url": "s3://d"}}),
        "DET_LATEST_CHECKPOINT": "uuid-1",
        "DET_STEPS_COMPLETED": "30",
        "DET_SLOT_IDS": "[0, 1]",
        "DET_GPU_UUIDS": '["GPU-a"]',
        "DET_CONTAINER_ADDRS": '["127.0.0.1"]',
        "DET_CONTAINER_RANK": "0",
        "DET_CONTAINER_SLOT_COUNTS": "[2]",
    }
    env.update(overrides)
    return env


def test_off_the_master_there_is_no_cluster_info(monkeypatch):
    for name in list(__import__("os").environ):
        if name.startswith("DET_"):
            monkeypatch.delenv(name)
    assert det.get_cluster_info() is None
    # A user's shell may point the CLI at a master: that alone does not make a task.
    monkeypatch.setenv("DET_MASTER", "http://127.0.0.1:8080")
    assert det.get_cluster_info() is None


def test_trial_environment_is_read(monkeypatch):
    for name, value in trial_env().items():
        monkeypatch.setenv(name, value)
    info = det.get_cluster_info()
    assert isinstance(info, det.ClusterInfo)
    assert info.master_url == "http://127.0.0.1:8080"
    assert (info.cluster_id, info.agent_id, info.task_id, info.allocation_id) == (
        "cluster-1",
        "host-a",
        "trial-7",
        "trial-7.2",
    )
    assert info.session_token == "trial-token"
    assert info.task_type == "TRIAL"
    assert info.slot_ids == [0, 1]
    assert info.gpu_uuids == ["GPU-a"]
    assert info.container_addrs == ["127.0.0.1"] and info.container_rank == 0
    assert info.container_slot_counts == [2]
    assert info.latest_checkpoint == "uuid-1"
    assert info.user_data == {"url": "s3://d"}
    trial = info.trial
    assert isinstance(trial, det.TrialInfo)
    assert (trial.trial_id, trial.experiment_id, trial.trial_seed) == (7, 3, 1234)
    assert trial.hparams == {"increment_by": 4, "optimizer": {"lr": 0.1}}
    assert trial._steps_completed == 30 and trial._trial_run_id == 2
    assert trial._config["name"] == "x"


def test_environment_changes_are_seen(monkeypatch):
    for name, value in trial_env().items():
        monkeypatch.setenv(name, value)
    assert det.get_cluster_info().latest_checkpoint == "uuid-1"
    monkeypatch.delenv("DET_LATEST_CHECKPOINT")
    assert det.get_cluster_info().latest_checkpoint is None


def test_non_trial_task_has_no_trial_info():
    info = ClusterInfo._from_env(trial_env(DET_TASK_TYPE="COMMAND"))
    assert info.task_type == "COMMAND"
    assert info.user_data == {}
    with pytest.raises(RuntimeError, match="only available in trials"):
        _ = info.trial


def test_bad_json_names_the_variable():
    with pytest.raises(ValueError, match="DET_HPARAMS"):
        ClusterInfo._from_env(trial_env(DET_HPARAMS="{not json"))


def test_top_level_names():
    assert det.LOG_FORMAT == "%(levelname)s: [%(process)s] %(name)s: %(message)s"
    assert issubclass(det.InvalidHP, Exception)
    assert det.Constant(3) == {"type": "const", "val": 3}
    assert det.Integer(1, 8) == {"type": "int", "minval": 1, "maxval": 8}
    assert det.Double(0.1, 0.5, count=3) == {
        "type": "double",
        "minval": 0.1,
        "maxval": 0.5,
        "count": 3,
    }
    assert det.Log(-4, -1, base=10) == {"type": "log", "minval": -4, "maxval": -1, "base": 10}
    assert det.Categorical(["a", "b"]) == {"type": "categorical", "vals": ["a", "b"]}
    with pytest.raises(ValueError, match="minval"):
        det.Integer(5, 1)


def test_core_init_on_the_master_needs_distributed_for_several_slots(monkeypatch):
    for name, value in trial_env(
        DET_EXPERIMENT_CONFIG=json.dumps(
            {"checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp", "storage_path": "."}}
        )
    ).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match="pass distributed="):
        det.core.init()
    # One slot: real contexts are built (nothing talks to the master until the context starts).
    monkeypatch.setenv("DET_SLOT_IDS", "[0]")
    monkeypatch.setenv("DET_CONTAINER_SLOT_COUNTS", "[1]")
    ctx = det.core.init()
    assert type(ctx.train).__name__ == "TrainContext"
    assert type(ctx.checkpoint).__name__ == "CheckpointContext"
    assert type(ctx.preempt).__name__ == "PreemptContext"
    assert type(ctx.searcher).__name__ == "SearcherContext"
    assert ctx.info.trial.trial_id == 7
    with pytest.raises(RuntimeError, match="before the core context started"):
        ctx.preempt.should_preempt()
