"""The experiment-editing part over a real store: resources edits reach the scheduler, and
deleting an experiment removes its rows and files but never what another experiment needs."""

from __future__ import annotations

import asyncio

import pytest

from master_lite import errors
from tests._support.parts import SINGLE, settle, started_parts


def test_patch_changes_name_description_and_labels_in_any_state(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, _):
            exp = parts.experiments.create_experiment(SINGLE, None)
            assert exp["notes"] == ""
            changed = parts.edits.patch_experiment(exp["id"], name="renamed", labels=["b", "a"])
            assert changed["name"] == "renamed" and changed["labels"] == ["b", "a"]
            noted = parts.edits.patch_experiment(exp["id"], notes="lr 0.1 diverged; try 0.03")
            assert noted["notes"] == "lr 0.1 diverged; try 0.03" and noted["name"] == "renamed"
            assert parts.views.experiment_row(exp["id"]).notes == "lr 0.1 diverged; try 0.03"
            with pytest.raises(errors.NotFound, match="experiment 999 not found"):
                parts.edits.patch_experiment(999, description="x")

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_new_priority_reorders_the_trials_that_wait(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root", slots=1) as (parts, runner):
            first = parts.experiments.create_experiment(SINGLE, None)
            second = parts.experiments.create_experiment({**SINGLE, "name": "second"}, None)
            third = parts.experiments.create_experiment({**SINGLE, "name": "third"}, None)
            [running] = parts.views.list_trials(first["id"])
            [waits_second] = parts.views.list_trials(second["id"])
            [waits_third] = parts.views.list_trials(third["id"])
            assert parts.runs.is_running(running["id"])
            assert not parts.runs.is_running(waits_third["id"])

            # Smaller is more important: the third experiment now goes before the second.
            edited = parts.edits.patch_experiment(third["id"], resources={"priority": 1})
            assert parts.views.get_experiment_config(third["id"])["resources"]["priority"] == 1
            assert edited["id"] == third["id"]
            parts.experiments.kill_trial(running["id"])
            runner.exit(parts.runs.allocation_id_of(running["id"]) or "", -9)
            await settle(lambda: parts.runs.is_running(waits_third["id"]))
            assert not parts.runs.is_running(waits_second["id"])

    asyncio.run(asyncio.wait_for(body(), 60))


def test_max_slots_zero_holds_the_experiments_trials_back_until_raised(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root", slots=2) as (parts, _):
            exp = parts.experiments.create_experiment(
                {**SINGLE, "resources": {"max_slots": 0}}, None
            )
            [trial] = parts.views.list_trials(exp["id"])
            assert not parts.runs.is_running(trial["id"])
            parts.edits.patch_experiment(exp["id"], resources={"max_slots": None, "weight": 2.5})
            assert parts.runs.is_running(trial["id"])
            resources = parts.views.get_experiment_config(exp["id"])["resources"]
            assert resources["max_slots"] is None and resources["weight"] == 2.5

    asyncio.run(asyncio.wait_for(body(), 60))


def test_bad_resources_edits_are_refused_naming_each_field_and_change_nothing(tmp_path):
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, _):
            exp = parts.experiments.create_experiment(SINGLE, None)
            before = parts.views.get_experiment_config(exp["id"])["resources"]
            with pytest.raises(errors.InvalidRequest) as caught:
                parts.edits.patch_experiment(
                    exp["id"],
                    name="kept?",
                    resources={"priority": 0, "max_slots": -1, "weight": "x", "slots_per_trial": 2},
                )
            assert [p.split(":")[0] for p in caught.value.errors] == [
                "body.resources.slots_per_trial",
                "body.resources.priority",
                "body.resources.max_slots",
                "body.resources.weight",
            ]
            assert parts.views.get_experiment_config(exp["id"])["resources"] == before
            assert parts.views.get_experiment(exp["id"])["name"] == "parts"

    asyncio.run(asyncio.wait_for(body(), 60))


async def _finished_experiment_with_a_checkpoint(parts, runner, root):
    """An experiment whose one trial reported metrics, a log line and a checkpoint (with files),
    then was killed: CANCELED."""
    exp = parts.experiments.create_experiment(SINGLE, None)
    [trial] = parts.views.list_trials(exp["id"])
    uuid = f"00000000-0000-4000-8000-{exp['id']:012d}"  # a UUID, as the master requires
    files = root / "checkpoints" / uuid
    files.mkdir(parents=True)
    (files / "weights.bin").write_bytes(b"w")
    parts.checkpoints.report_checkpoint(
        {"uuid": uuid, "trial_id": trial["id"], "metadata": {"steps_completed": 10}}
    )
    parts.reports.report_metrics(
        trial["id"], [{"group": "validation", "steps_completed": 10, "metrics": {"loss": 0.5}}]
    )
    parts.logs.master_log(trial["id"], "a line")
    parts.experiments.experiment_action(exp["id"], "kill")
    runner.exit(parts.runs.allocation_id_of(trial["id"]) or "", -9)
    await settle(lambda: parts.views.get_experiment(exp["id"])["state"] == "CANCELED")
    return exp, trial, uuid, files


def test_delete_removes_rows_logs_metrics_and_checkpoint_files(tmp_path):
    root = tmp_path / "root"

    async def body() -> None:
        async with started_parts(root) as (parts, runner):
            exp, trial, uuid, files = await _finished_experiment_with_a_checkpoint(
                parts, runner, root
            )
            other = parts.experiments.create_experiment({**SINGLE, "name": "other"}, None)
            (root / "trials" / str(trial["id"])).mkdir(parents=True, exist_ok=True)
            events = parts.views._shared.events.subscribe(types=["experiment"])
            answer = parts.edits.delete_experiment(exp["id"])
            assert answer == {"id": exp["id"], "deleted_checkpoints": 1, "deleted_trials": 1}
            assert not files.exists()
            assert not (root / "trials" / str(trial["id"])).exists()
            store = parts.views._shared.store
            assert store.checkpoints.get(uuid) is None
            assert store.trials.get(trial["id"]) is None
            assert (
                store.scalar("SELECT count(*) FROM metrics WHERE trial_id = ?", [trial["id"]]) == 0
            )
            assert store.scalar("SELECT count(*) FROM logs WHERE trial_id = ?", [trial["id"]]) == 0
            with pytest.raises(errors.NotFound):
                parts.views.get_experiment(exp["id"])
            # The other experiment is untouched.
            assert [e["id"] for e in parts.views.list_experiments()] == [other["id"]]
            # Whoever shows experiments hears it is gone.
            kind, payload = events.get_nowait() or ("none", {})
            assert kind == "experiment"
            assert (payload["id"], payload["state"], payload["deleted"]) == (
                exp["id"],
                "DELETED",
                True,
            )

    asyncio.run(asyncio.wait_for(body(), 60))


def test_delete_refuses_a_running_experiment_and_one_whose_checkpoint_a_live_one_needs(tmp_path):
    root = tmp_path / "root"

    async def body() -> None:
        async with started_parts(root) as (parts, runner):
            exp, _, uuid, files = await _finished_experiment_with_a_checkpoint(parts, runner, root)
            warm = parts.experiments.create_experiment(
                {**SINGLE, "searcher": {**SINGLE["searcher"], "source_checkpoint_uuid": uuid}},
                None,
            )
            with pytest.raises(errors.Conflict, match=f"experiment {warm['id']} is ACTIVE"):
                parts.edits.delete_experiment(warm["id"])
            assert parts.checkpoints.protected_uuids(exp["id"]) == {uuid}
            with pytest.raises(errors.Conflict, match=f"checkpoint {uuid} is still needed"):
                parts.edits.delete_experiment(exp["id"])
            assert files.exists()
            assert parts.views.get_experiment(exp["id"])["state"] == "CANCELED"
            with pytest.raises(errors.NotFound):
                parts.edits.delete_experiment(999)

    asyncio.run(asyncio.wait_for(body(), 60))


def test_delete_keeps_an_experiment_whose_checkpoint_is_registered_until_the_version_goes(
    tmp_path,
):
    root = tmp_path / "root"

    async def body() -> None:
        async with started_parts(root) as (parts, runner):
            exp, _, uuid, files = await _finished_experiment_with_a_checkpoint(parts, runner, root)
            parts.models.create_model("digits")
            parts.models.register_version("digits", uuid)
            assert parts.checkpoints.protected_uuids(exp["id"]) == {uuid}
            with pytest.raises(errors.Conflict) as refused:
                parts.edits.delete_experiment(exp["id"])
            assert "version 1 of model 'digits'" in refused.value.message
            assert "det model delete-version" in refused.value.message
            assert files.exists() and parts.views.get_experiment(exp["id"])["state"] == "CANCELED"

            parts.models.delete_version("digits", 1)
            assert parts.edits.delete_experiment(exp["id"])["deleted_checkpoints"] == 1
            assert not files.exists()

    asyncio.run(asyncio.wait_for(body(), 60))
