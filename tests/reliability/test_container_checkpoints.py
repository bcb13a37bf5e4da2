"""A container trial sees only its own checkpoints, plus what it restores from (issue 26, row 2).

The whole `shared_fs` storage used to be mounted into every trial container, so a trial could
list every uuid and read any experiment's checkpoint. Now a container trial gets its own view
(runners/container/_storage.py): its saves, its TensorBoard directory, and, read-only, the one
checkpoint it restores from. Its reported checkpoints are in the real storage (hard links), so
the record, downloads and resumes work as before. Real master, real Podman.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Callable

from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    assert_clean_series,
    marked_values,
    resumed_from,
    submit,
    wait_for_experiment,
    wait_until,
)
from tests._support.containers import HOST_USR, containers_of, remove_containers_of

# Runs before the trial's script in every run: what of the storage can it see and read?
LOOK = """
import json, os, pathlib
storage = json.loads(os.environ["DET_EXPERIMENT_CONFIG"])["checkpoint_storage"]
base = pathlib.Path(storage["host_path"]) / (storage.get("storage_path") or ".")
victim = os.environ["VICTIM"]
try:
    (base / victim / "state").read_text()
    readable = True
except OSError:
    readable = False
try:
    listing = sorted(p.name for p in base.iterdir())
except OSError as exc:
    listing = [f"error {exc}"]
print("STORAGE " + json.dumps({"listing": listing, "victim_readable": readable}), flush=True)
"""


def _config(image: str, *, victim: str, step_sleep: float) -> dict:
    return {
        "name": "container-checkpoints",
        "entrypoint": "python3 look.py && python3 train.py",
        "max_restarts": 0,
        "hyperparameters": {"increment_by": 2},
        "searcher": {"name": "single", "metric": "x", "max_length": 100},
        "environment": {
            "image": image,
            "environment_variables": [f"VICTIM={victim}", f"STEP_SLEEP={step_sleep}"],
        },
        "bind_mounts": [HOST_USR],
    }


def _is_uuid(name: str) -> bool:
    try:
        return str(uuid_module.UUID(name)) == name
    except ValueError:
        return False


def test_row2_a_container_trial_sees_only_its_own_checkpoints_and_still_resumes(
    start_master: Callable[..., MasterProcess], container_images: dict[str, str]
) -> None:
    master = start_master()
    try:
        files = {"look.py": LOOK, "train.py": CHECKPOINTING_SCRIPT}
        image = container_images["a"]
        # The victim: another experiment's checkpoints, in the same storage.
        victim_exp = submit(master, _config(image, victim="none", step_sleep=0.001), files)
        assert wait_for_experiment(master, victim_exp)["state"] == "COMPLETED"
        victims = master.session.get(f"/experiments/{victim_exp}/checkpoints")["checkpoints"]
        victim = victims[-1]["uuid"]
        assert (master.root_dir / "checkpoints" / victim / "state").is_file()

        # The trial: paused after its first checkpoint, then resumed.
        exp_id = submit(master, _config(image, victim=victim, step_sleep=0.05), files)
        (trial,) = master.trials(exp_id)

        def checkpointed() -> bool:
            listed = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
            return bool(listed)

        wait_until(checkpointed, 120, "the trial's first checkpoint")
        master.session.post(f"/experiments/{exp_id}/pause")
        wait_until(lambda: master.trials(exp_id)[0]["state"] == "PAUSED", 120, "the pause")
        master.session.post(f"/experiments/{exp_id}/activate")
        assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"

        # It resumed from its checkpoint (read through its view) and lost nothing.
        starts = resumed_from(master, trial["id"])
        assert len(starts) == 2 and starts[0] == 0 and starts[1] > 0, starts
        assert_clean_series(master, master.trials(exp_id)[0])

        # Every run saw only checkpoints of its own experiment, never the victim's.
        own = {
            c["uuid"]
            for c in master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
        }
        looks = marked_values("\n".join(master.logs(trial["id"])), "STORAGE")
        assert len(looks) == 2, looks
        for look in looks:
            assert look["victim_readable"] is False, look
            seen = {name for name in look["listing"] if _is_uuid(name)}
            assert seen <= own, (seen, own)
            assert victim not in look["listing"] and ".det-trials" not in look["listing"]
        # The second run saw the checkpoint it resumed from.
        assert {name for name in looks[1]["listing"] if _is_uuid(name)}, looks[1]

        # The reported checkpoints are real directories of the storage (hard links of what
        # the trial wrote): the last one holds the final state and downloads as before.
        last = max(
            master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"],
            key=lambda c: c["steps_completed"],
        )
        stored = master.root_dir / "checkpoints" / last["uuid"] / "state"
        assert stored.read_text() == f"200,100,{trial['id']}"
        assert containers_of(master.root_dir) == []

        # A warm start from the victim's checkpoint sees that one (read-only), nothing else
        # of the victim's, and starts from its state.
        warm = _config(image, victim=victim, step_sleep=0.001)
        warm["searcher"]["source_checkpoint_uuid"] = victim
        warm_exp = submit(master, warm, files)
        assert wait_for_experiment(master, warm_exp)["state"] == "COMPLETED"
        (warm_trial,) = master.trials(warm_exp)
        (look,) = marked_values("\n".join(master.logs(warm_trial["id"])), "STORAGE")
        assert look["victim_readable"] is True, look
        assert {n for n in look["listing"] if _is_uuid(n)} == {victim}, look
        assert master.series(warm_trial["id"], "validation")[-1][1]["x"] == 400
        assert (master.root_dir / "checkpoints" / victim / "state").read_text() == (
            f"200,100,{master.trials(victim_exp)[0]['id']}"
        ), "the warm start changed its source"
        # Once the trial finished, its view goes (its links would keep deleted checkpoints'
        # space), at the latest when the master collects at its next start.
        views = master.root_dir / "checkpoints" / ".det-trials"
        wait_until(
            lambda: not any(p.name.endswith(f"-trial-{trial['id']}") for p in views.iterdir()),
            60,
            "the finished trial's view to be removed",
        )
    finally:
        remove_containers_of(master.root_dir)
