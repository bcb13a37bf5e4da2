"""Deleting an experiment over HTTP against a real master: what it leaves on disk."""

from __future__ import annotations

import pathlib

import pytest
import requests

from tests._support import MasterProcess, context_tarball, submit, wait_for_experiment

pytestmark = pytest.mark.slow

# A trial that writes TensorBoard event files of its own (as a Keras or PyTorch TensorBoard
# writer does into get_tensorboard_path()); AUTO mode copies them to checkpoint storage.
TRAIN_PY = """
from determined import core

with core.init() as core_context:
    events = core_context.train.get_tensorboard_path()
    events.mkdir(parents=True, exist_ok=True)
    (events / "events.out.tfevents.1.host").write_bytes(b"not really a record")
    for op in core_context.searcher.operations():
        core_context.train.report_training_metrics(steps_completed=op.length, metrics={"loss": 1.0})
        op.report_completed(1.0)
"""


def test_deleting_an_experiment_removes_its_trials_tensorboard_files(tmp_path):
    with MasterProcess(tmp_path / "root") as master:
        config = {
            "name": "delete-tensorboard-files",
            "entrypoint": "python3 train.py",
            "max_restarts": 0,
            "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        }
        exp_id = submit(master, config, {"train.py": TRAIN_PY})
        wait_for_experiment(master, exp_id, {"COMPLETED"})
        storage = master.session.get(f"/experiments/{exp_id}")["experiment"]["config"][
            "checkpoint_storage"
        ]
        base = pathlib.Path(storage["host_path"]) / storage["storage_path"]
        experiment_files = base / "tensorboard" / "experiment" / str(exp_id)
        [trial] = master.trials(exp_id)
        copied = experiment_files / "trial" / str(trial["id"]) / "events.out.tfevents.1.host"
        assert copied.read_bytes() == b"not really a record"

        answer = requests.delete(
            f"{master.url}/api/v1/experiments/{exp_id}",
            headers={"Authorization": f"Bearer {master.token}"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text

        assert not experiment_files.exists()
        # Only that experiment's: the directory the others' go into stays.
        assert (base / "tensorboard" / "experiment").is_dir()


def test_deleting_the_last_experiment_of_a_context_removes_the_stored_context(tmp_path):
    config = {
        "name": "delete-context",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
    }
    shared = {"train.py": TRAIN_PY}
    own = {"train.py": TRAIN_PY, "notes.txt": "only this experiment's context"}
    with MasterProcess(tmp_path / "root") as master:
        # One tarball sent twice: the same content, so one stored context.
        shared_tarball = context_tarball(shared)
        first = master.create_experiment(config, shared_tarball)
        second = master.create_experiment(config, shared_tarball)
        alone = submit(master, config, own)
        for exp_id in (first, second, alone):
            wait_for_experiment(master, exp_id, {"COMPLETED"})
        hashes = {
            exp_id: master.session.get(f"/experiments/{exp_id}")["experiment"]["context_hash"]
            for exp_id in (first, second, alone)
        }
        assert hashes[first] == hashes[second] != hashes[alone]
        tarballs = master.root_dir / "contexts"
        assert {p.name for p in tarballs.iterdir()} == {
            f"{hashes[first]}.tar.gz",
            f"{hashes[alone]}.tar.gz",
        }

        def delete(exp_id: int) -> None:
            answer = requests.delete(
                f"{master.url}/api/v1/experiments/{exp_id}",
                headers={"Authorization": f"Bearer {master.token}"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text

        delete(alone)
        delete(first)
        # The shared context stays for the experiment that still has it (and can download it).
        assert {p.name for p in tarballs.iterdir()} == {f"{hashes[second]}.tar.gz"}
        assert [row["hash"] for row in master.db_rows("SELECT hash FROM contexts")] == [
            hashes[second]
        ]
        code = requests.get(
            f"{master.url}/api/v1/experiments/{second}/context",
            headers={"Authorization": f"Bearer {master.token}"},
            timeout=60,
        )
        assert code.status_code == 200 and len(code.content) > 0
        delete(second)
        assert list(tarballs.iterdir()) == []
        assert master.db_rows("SELECT hash FROM contexts") == []
