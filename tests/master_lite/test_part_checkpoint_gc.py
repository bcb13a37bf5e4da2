"""The checkpoint GC part on its own, over a real store and real checkpoint directories."""

from __future__ import annotations

from master_lite._gc import CheckpointCollector
from master_lite.store import Store


def test_a_finished_experiment_keeps_its_best_and_latest_and_deletes_the_rest(tmp_path):
    store = Store(tmp_path / "master.db")
    storage = {
        "type": "shared_fs",
        "host_path": str(tmp_path),
        "storage_path": "ckpts",
        "save_experiment_best": 0,
        "save_trial_best": 1,
        "save_trial_latest": 1,
    }
    config = {
        "searcher": {"metric": "loss", "smaller_is_better": True},
        "checkpoint_storage": storage,
    }
    exp_id = store.insert("experiments", name="e", state="COMPLETED", config=config, start_time=1.0)
    trial_id = store.insert(
        "trials",
        experiment_id=exp_id,
        request_id=1,
        state="COMPLETED",
        hparams={},
        seed=1,
        start_time=1.0,
    )
    losses = {10: 0.2, 20: 0.9, 30: 0.5}  # best at 10, latest at 30: 20 goes
    for steps, loss in losses.items():
        uuid = f"ckpt-{steps}"
        (tmp_path / "ckpts" / uuid).mkdir(parents=True)
        store.checkpoints.put(
            {
                "uuid": uuid,
                "trial_id": trial_id,
                "experiment_id": exp_id,
                "allocation_id": "trial-1.1",
                "steps_completed": steps,
                "metadata": {"steps_completed": steps},
                "resources": {"model.pt": 1},
                "state": "COMPLETED",
                "report_time": float(steps),
                "path": str(tmp_path / "ckpts" / uuid),
            }
        )
        store.insert_metrics(
            [
                {
                    "trial_id": trial_id,
                    "trial_run_id": 1,
                    "group": "validation",
                    "steps_completed": steps,
                    "metrics": {"loss": loss},
                    "report_time": float(steps),
                }
            ]
        )
    deleted: list[str] = []
    CheckpointCollector(store, on_deleted=deleted.append).collect_pending()

    assert deleted == ["ckpt-20"]
    assert sorted(p.name for p in (tmp_path / "ckpts").iterdir()) == ["ckpt-10", "ckpt-30"]
    states = {c.uuid: c.state for c in store.checkpoints.matching(experiment_id=exp_id)}
    assert states == {"ckpt-10": "COMPLETED", "ckpt-20": "DELETED", "ckpt-30": "COMPLETED"}
    assert store.get("experiments", exp_id)["checkpoint_gc_done"] == 1
    assert store.experiments.awaiting_checkpoint_gc() == []
    store.close()
