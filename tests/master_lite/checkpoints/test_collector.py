"""The checkpoint GC part on its own, over a real store and real checkpoint directories."""

from __future__ import annotations

from master_lite._core._trash import TRASH_PREFIX
from master_lite.checkpoints._gc import CheckpointCollector
from master_lite.store import Store
from tests._support.stored import finished_experiment


def test_a_finished_experiment_keeps_its_best_and_latest_and_deletes_the_rest(tmp_path):
    store = Store(tmp_path / "master.db")
    keep = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
    # Best at step 10, latest at 30: 20 goes.
    best, middle, latest = finished_experiment(
        store, tmp_path / "ckpts", {10: 0.2, 20: 0.9, 30: 0.5}, keep=keep
    )
    deleted: list[str] = []
    CheckpointCollector(store, on_deleted=deleted.append).collect_pending()

    assert deleted == [middle]
    # (A deleted directory may still sit in the trash, renamed, while a thread removes it.)
    left = (tmp_path / "ckpts").iterdir()
    assert sorted(p.name for p in left if not p.name.startswith(TRASH_PREFIX)) == sorted(
        [best, latest]
    )
    exp_id = store.checkpoints.get(best).experiment_id
    states = {c.uuid: c.state for c in store.checkpoints.matching(experiment_id=exp_id)}
    assert states == {best: "COMPLETED", middle: "DELETED", latest: "COMPLETED"}
    assert store.get("experiments", exp_id)["checkpoint_gc_done"] == 1
