"""Checkpoint GC after an experiment ends: which checkpoints are kept (save_experiment_best,
save_trial_best, save_trial_latest) and which are deleted from storage and marked DELETED."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from determined.common import storage
from master_lite import errors
from master_lite._master import Master
from master_lite.checkpoints._gc import GcPolicy, checkpoints_to_keep
from master_lite.store import CheckpointRow


def ckpt(uuid, trial_id, steps, report_time=None):
    return CheckpointRow(
        uuid=uuid,
        trial_id=trial_id,
        experiment_id=1,
        allocation_id=None,
        steps_completed=steps,
        metadata={},
        resources={},
        state="COMPLETED",
        report_time=float(steps if report_time is None else report_time),
        path=uuid,
    )


# -- the pure policy --------------------------------------------------------------------------
def test_defaults_keep_best_and_latest_of_each_trial():
    checkpoints = [
        ckpt("a10", 1, 10),
        ckpt("a20", 1, 20),
        ckpt("a30", 1, 30),
        ckpt("b10", 2, 10),
        ckpt("b20", 2, 20),
    ]
    metrics = {"a10": 0.5, "a20": 0.2, "a30": 0.4, "b10": 0.1, "b20": None}
    keep = checkpoints_to_keep(checkpoints, metrics, GcPolicy())
    assert keep == {"a20", "a30", "b10", "b20"}


def test_larger_is_better_flips_the_ranking():
    checkpoints = [ckpt("a10", 1, 10), ckpt("a20", 1, 20), ckpt("a30", 1, 30)]
    metrics = {"a10": 0.9, "a20": 0.2, "a30": 0.4}
    keep = checkpoints_to_keep(checkpoints, metrics, GcPolicy(0, 1, 0), smaller_is_better=False)
    assert keep == {"a10"}


def test_experiment_best_spans_trials_and_unvalidated_rank_last():
    checkpoints = [
        ckpt("a10", 1, 10),
        ckpt("a20", 1, 20),
        ckpt("b10", 2, 10),
        ckpt("b20", 2, 20),
        ckpt("c10", 3, 10),
    ]
    metrics = {"a10": 0.3, "a20": 0.1, "b10": 0.2, "b20": None, "c10": None}
    assert checkpoints_to_keep(checkpoints, metrics, GcPolicy(2, 0, 0)) == {"a20", "b10"}
    # More best slots than validated checkpoints: unvalidated ones fill them, fewest steps first.
    assert checkpoints_to_keep(checkpoints, metrics, GcPolicy(4, 0, 0)) == {
        "a20",
        "b10",
        "a10",
        "c10",
    }
    # Ties go to the earlier checkpoint.
    tied = {"a10": 0.1, "a20": 0.1, "b10": 0.5, "b20": 0.5, "c10": 0.5}
    assert checkpoints_to_keep(checkpoints, tied, GcPolicy(1, 0, 0)) == {"a10"}


def test_nothing_saved_when_every_count_is_zero():
    checkpoints = [ckpt("a10", 1, 10), ckpt("a20", 1, 20)]
    assert checkpoints_to_keep(checkpoints, {"a10": 1.0}, GcPolicy(0, 0, 0)) == set()


@pytest.mark.parametrize("counts", list(itertools.product([0, 1, 2, 5], repeat=3)))
def test_kept_set_is_the_union_of_the_three_rules(counts):
    # Three trials with 4 checkpoints each; metric = (trial * 7 + steps) % 5, some missing.
    checkpoints, metrics = [], {}
    for trial in (1, 2, 3):
        for steps in (10, 20, 30, 40):
            uuid = f"{trial}-{steps}"
            checkpoints.append(ckpt(uuid, trial, steps))
            metrics[uuid] = None if (trial + steps // 10) % 4 == 0 else (trial * 7 + steps) % 5
    policy = GcPolicy(*counts)
    keep = checkpoints_to_keep(checkpoints, metrics, policy)

    def rank(c):
        value = metrics[c.uuid]
        return (value is None, value or 0, c.steps_completed)

    expected = {c.uuid for c in sorted(checkpoints, key=rank)[: policy.save_experiment_best]}
    for trial in (1, 2, 3):
        mine = [c for c in checkpoints if c.trial_id == trial]
        expected |= {c.uuid for c in sorted(mine, key=rank)[: policy.save_trial_best]}
        expected |= {
            c.uuid
            for c in sorted(mine, key=lambda c: -c.steps_completed)[: policy.save_trial_latest]
        }
    assert keep == expected


def test_policy_reads_checkpoint_storage():
    assert GcPolicy.from_storage_config({"type": "shared_fs", "save_trial_best": 3}) == GcPolicy(
        0, 3, 1
    )
    assert GcPolicy.from_storage_config(None) == GcPolicy(0, 1, 1)


# -- the master: GC when an experiment ends ---------------------------------------------------
def run(test):
    """An in-process master whose trials never start (created paused): the test plays the
    trial's part by reporting checkpoints and metrics through the facade."""

    def wrapper(tmp_path):
        async def body():
            master = Master(tmp_path / "root", cpu_slots=1, gpus=[])
            await master.start("http://127.0.0.1:9")
            try:
                await test(master, tmp_path)
            finally:
                await master.stop(pause_running=False)

        asyncio.run(asyncio.wait_for(body(), 60))

    wrapper.__name__ = test.__name__
    return wrapper


def config(**searcher):
    return {
        "name": "gc",
        "entrypoint": "python3 -c pass",
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_trials": 2,
            "max_length": 100,
            **searcher,
        },
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
        "checkpoint_storage": {
            "save_experiment_best": 0,
            "save_trial_best": 1,
            "save_trial_latest": 1,
        },
    }


def save(master, trial, steps, loss=None):
    """What a trial does: write the checkpoint into storage, register it, validate."""
    uuid = f"00000000-0000-4000-{trial['id']:04d}-{steps:012d}"  # a UUID, as required
    storage_config = master.views.get_experiment_config(trial["experiment_id"])[
        "checkpoint_storage"
    ]
    path = storage.checkpoint_dir(storage_config, uuid)
    path.mkdir(parents=True)
    (path / "weights").write_text(str(steps))
    master.checkpoints.report_checkpoint(
        {
            "uuid": uuid,
            "trialId": trial["id"],
            "metadata": {"steps_completed": steps},
            "resources": {"weights": len(str(steps))},
        }
    )
    if loss is not None:
        master.reports.report_metrics(
            trial["id"],
            [{"group": "validation", "steps_completed": steps, "metrics": {"loss": loss}}],
        )
    return uuid


async def settle():
    for _ in range(5):  # GC is queued on the loop after the change that ended the experiment
        await asyncio.sleep(0)


def states(master, exp_id):
    return {
        c["uuid"]: c["state"] for c in master.checkpoints.list_checkpoints(experiment_id=exp_id)
    }


@run
async def test_gc_after_the_end_deletes_files_and_marks_deleted(master, tmp_path):
    exp_id = master.experiments.create_experiment(config(), None, activate=False)["id"]
    first, second = master.views.list_trials(exp_id)
    a = [
        save(master, first, 10, 0.5),
        save(master, first, 20, 0.1),
        save(master, first, 30),
        save(master, first, 40, 0.3),
    ]
    b = [save(master, second, 10, 0.9), save(master, second, 20, 0.8)]
    await settle()
    assert set(states(master, exp_id).values()) == {"COMPLETED"}  # nothing while it lives

    master.experiments.experiment_action(exp_id, "cancel")
    await settle()
    assert master.views.get_experiment(exp_id)["state"] == "CANCELED"
    kept = {a[1], a[3], b[1]}  # best (0.1 at 20) and latest (40) of trial 1; b's best is its latest
    assert states(master, exp_id) == {u: "COMPLETED" if u in kept else "DELETED" for u in a + b}
    for checkpoint in master.checkpoints.list_checkpoints(experiment_id=exp_id):
        on_disk = (tmp_path / "root" / "checkpoints" / checkpoint["uuid"]).is_dir()
        assert on_disk == (checkpoint["uuid"] in kept), checkpoint
        if checkpoint["state"] == "DELETED":
            assert checkpoint["resources"] == {}
    assert master.store.get("experiments", exp_id)["checkpoint_gc_done"] == 1


@run
async def test_checkpoints_needed_by_live_trials_are_held_until_they_finish(master, tmp_path):
    source_exp = master.experiments.create_experiment(config(), None, activate=False)["id"]
    trial, _ = master.views.list_trials(source_exp)
    early = save(master, trial, 10, 0.1)  # best
    middle = save(master, trial, 20, 0.5)  # neither best nor latest: garbage...
    save(master, trial, 30, 0.7)  # latest
    # ... but a paused experiment warm-starts from it: its trials need it.
    warm = master.experiments.create_experiment(
        config(source_checkpoint_uuid=middle), None, activate=False
    )["id"]
    assert {t["latest_checkpoint"] for t in master.views.list_trials(warm)} == {middle}

    master.experiments.experiment_action(source_exp, "cancel")
    await settle()
    assert states(master, source_exp)[middle] == "COMPLETED"
    assert (tmp_path / "root" / "checkpoints" / middle).is_dir()
    assert states(master, source_exp)[early] == "COMPLETED"
    assert master.store.get("experiments", source_exp)["checkpoint_gc_done"] == 0

    master.experiments.experiment_action(warm, "cancel")  # the last user is gone: collected now
    await settle()
    assert states(master, source_exp)[middle] == "DELETED"
    assert not (tmp_path / "root" / "checkpoints" / middle).exists()
    assert master.store.get("experiments", source_exp)["checkpoint_gc_done"] == 1


@run
async def test_a_resumed_runs_validation_decides_the_checkpoint_metric(master, tmp_path):
    exp_id = master.experiments.create_experiment(config(), None, activate=False)["id"]
    trial, _ = master.views.list_trials(exp_id)
    ten = save(master, trial, 10, 0.2)
    twenty = save(master, trial, 20, 0.6)
    thirty = save(master, trial, 30, 0.9)
    # A later run redid step 10 and validated it worse: that report is the current one.
    master.store.update("trials", trial["id"], run_id=2)
    master.reports.report_metrics(
        trial["id"],
        [
            {
                "group": "validation",
                "steps_completed": 10,
                "trial_run_id": 2,
                "metrics": {"loss": 0.7},
            }
        ],
    )
    master.experiments.experiment_action(exp_id, "cancel")
    await settle()
    assert states(master, exp_id) == {ten: "DELETED", twenty: "COMPLETED", thirty: "COMPLETED"}


@run
async def test_gc_refuses_to_leave_the_storage_directory(master, tmp_path):
    exp_id = master.experiments.create_experiment(config(), None, activate=False)["id"]
    trial, _ = master.views.list_trials(exp_id)
    for bad in ("../outside", "..", "a/b", ".ssh"):
        with pytest.raises(errors.InvalidRequest, match="is not a UUID"):
            master.checkpoints.report_checkpoint(
                {"uuid": bad, "trialId": trial["id"], "metadata": {"steps_completed": 1}}
            )


@run
async def test_a_user_deletes_one_checkpoint_unless_a_live_trial_needs_it(master, tmp_path):
    exp_id = master.experiments.create_experiment(config(), None, activate=False)["id"]
    trial, _ = master.views.list_trials(exp_id)
    old = save(master, trial, 10, 0.5)
    latest = save(master, trial, 20, 0.4)  # the (paused) trial resumes from it
    with pytest.raises(errors.Conflict, match=f"checkpoint {latest} is in use"):
        master.delete_checkpoint(latest)
    assert (tmp_path / "root" / "checkpoints" / latest).is_dir()

    deleted = master.delete_checkpoint(old)
    assert deleted["state"] == "DELETED" and deleted["resources"] == {}
    assert not (tmp_path / "root" / "checkpoints" / old).exists()
    with pytest.raises(errors.Conflict, match="is DELETED"):
        master.delete_checkpoint(old)
    with pytest.raises(errors.NotFound, match="checkpoint nope not found"):
        master.delete_checkpoint("nope")
