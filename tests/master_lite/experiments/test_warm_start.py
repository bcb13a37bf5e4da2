"""Warm starts: `searcher.source_trial_id` / `searcher.source_checkpoint_uuid` make every trial of
a new experiment start from that checkpoint (its DET_LATEST_CHECKPOINT); a source that does not
exist is refused when the experiment is created, naming the field."""

from __future__ import annotations

import asyncio

import pytest

from master_lite import errors
from master_lite._master import Master
from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    clean_series,
    context_tarball,
    wait_for_experiment,
)

# Checkpoint uuids are UUIDs (the master refuses others): readable fixed ones.
GONE = "00000000-0000-4000-8000-00000000d00e"


def src_uuid(steps: int) -> str:
    """The uuid of the source trial's checkpoint at `steps`."""
    return f"00000000-0000-4000-8000-{steps:012d}"


def config(**searcher):
    return {
        "name": "warm",
        "entrypoint": "python3 train.py",
        "hyperparameters": {"increment_by": {"type": "int", "minval": 1, "maxval": 8}},
        "searcher": {"name": "single", "metric": "x", **searcher},
        "environment": {"environment_variables": ["STEP_SLEEP=0.005"]},
    }


def with_master(test):
    def wrapper(tmp_path):
        async def body():
            master = Master(tmp_path / "root", cpu_slots=1, gpus=[])
            await master.start("http://127.0.0.1:9")
            try:
                await test(master)
            finally:
                await master.stop(pause_running=False)

        asyncio.run(asyncio.wait_for(body(), 60))

    wrapper.__name__ = test.__name__
    return wrapper


@with_master
async def test_missing_sources_are_refused_at_creation_naming_the_field(master):
    cases = [
        ({"source_trial_id": 999}, "searcher.source_trial_id: trial 999 does not exist"),
        (
            {"source_checkpoint_uuid": "no-such-uuid"},
            "searcher.source_checkpoint_uuid: checkpoint no-such-uuid does not exist",
        ),
        ({"source_trial_id": 1, "source_checkpoint_uuid": "x"}, "set at most one"),
    ]
    for searcher, message in cases:
        with pytest.raises(errors.InvalidRequest) as refused:
            master.experiments.create_experiment(config(**searcher), None)
        assert message in str(refused.value) and message in refused.value.errors[0]
    assert master.views.list_experiments() == []

    # A trial that exists but never checkpointed has nothing to start from.
    source = master.experiments.create_experiment(config(), None, activate=False)["id"]
    (trial,) = master.views.list_trials(source)
    with pytest.raises(
        errors.InvalidRequest,
        match=f"searcher.source_trial_id: trial {trial['id']} has no checkpoint",
    ):
        master.experiments.create_experiment(config(source_trial_id=trial["id"]), None)

    # A deleted checkpoint is no source either.
    master.checkpoints.report_checkpoint(
        {"uuid": GONE, "trialId": trial["id"], "metadata": {"steps_completed": 5}}
    )
    master.checkpoints.mark_checkpoints_deleted([{"uuid": GONE, "resources": {}}])
    with pytest.raises(
        errors.InvalidRequest,
        match=f"searcher.source_checkpoint_uuid: checkpoint {GONE} is DELETED",
    ):
        master.experiments.create_experiment(config(source_checkpoint_uuid=GONE), None)


@with_master
async def test_every_trial_of_the_new_experiment_gets_the_source(master):
    source = master.experiments.create_experiment(config(), None, activate=False)["id"]
    (trial,) = master.views.list_trials(source)
    for steps in (10, 20):
        master.checkpoints.report_checkpoint(
            {
                "uuid": src_uuid(steps),
                "trialId": trial["id"],
                "metadata": {"steps_completed": steps},
            }
        )
    by_trial = master.experiments.create_experiment(
        {
            **config(source_trial_id=trial["id"]),
            "searcher": {
                "name": "random",
                "metric": "x",
                "max_trials": 3,
                "source_trial_id": trial["id"],
            },
        },
        None,
        activate=False,
    )["id"]
    assert [t["latest_checkpoint"] for t in master.views.list_trials(by_trial)] == [
        src_uuid(20)
    ] * 3
    by_uuid = master.experiments.create_experiment(
        config(source_checkpoint_uuid=src_uuid(10)), None, activate=False
    )["id"]
    assert [t["latest_checkpoint"] for t in master.views.list_trials(by_uuid)] == [src_uuid(10)]


@pytest.mark.slow
def test_warm_started_trial_continues_from_the_source_checkpoint(tmp_path):
    context = context_tarball({"train.py": CHECKPOINTING_SCRIPT})
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        # Keep the two latest checkpoints of the source (steps 90 and 100) through GC.
        source_config = {**config(), "checkpoint_storage": {"save_trial_latest": 2}}
        source = master.create_experiment(source_config, context)
        assert wait_for_experiment(master, source)["state"] == "COMPLETED"
        (source_trial,) = master.trials(source)
        source_inc = source_trial["hparams"]["increment_by"]
        kept = {
            c["steps_completed"]: c["uuid"]
            for c in master.session.get(
                f"/experiments/{source}/checkpoints", {"state": "COMPLETED"}
            )["checkpoints"]
        }
        assert sorted(kept) == [90, 100]
        assert source_trial["latest_checkpoint"] == kept[100]

        for searcher, uuid, start_x in (
            ({"source_trial_id": source_trial["id"]}, kept[100], 100 * source_inc),
            ({"source_checkpoint_uuid": kept[90]}, kept[90], 90 * source_inc),
        ):
            exp_id = master.create_experiment(config(**searcher), context)
            assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
            (trial,) = master.trials(exp_id)
            logs = master.logs(trial["id"])
            assert f"latest checkpoint {uuid}" in logs  # DET_LATEST_CHECKPOINT
            # Another trial's checkpoint: the weights (x) carry over, the step count restarts.
            assert f"starting at step 0 with x {start_x}" in logs
            expected = clean_series(trial["hparams"]["increment_by"], start_x=start_x)
            assert master.series(trial["id"], "training") == expected["training"]
            assert master.series(trial["id"], "validation") == expected["validation"]

        with pytest.raises(Exception, match="searcher.source_trial_id: trial 4242 does not"):
            master.create_experiment(config(source_trial_id=4242), context)
