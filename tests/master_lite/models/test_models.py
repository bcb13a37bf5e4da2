"""The model registry part over a real store and real checkpoint directories: Determined's
registry rules, and checkpoint GC and deletion keeping what a model version names."""

from __future__ import annotations

import pytest

from master_lite import errors
from master_lite._core._trash import TRASH_PREFIX
from master_lite._master._wiring import Parts
from master_lite.checkpoints._gc import CheckpointCollector
from tests._support.parts import FakeRunner, run_with_parts
from tests._support.stored import finished_experiment

# The GC policy of the registry tests' experiments: only the latest checkpoint is kept.
LATEST_ONLY = {"save_experiment_best": 0, "save_trial_best": 0, "save_trial_latest": 1}


def test_models_are_created_read_listed_and_edited_by_determined_rules(tmp_path):
    async def body(parts: Parts, _runner: FakeRunner) -> None:
        models = parts.models
        created = models.create_model(
            "mnist-cnn", description="digits", metadata={"a": 1}, labels=["cv", "cv", "small"]
        )
        assert created["name"] == "mnist-cnn" and created["num_versions"] == 0
        assert created["labels"] == ["cv", "small"]  # repeats dropped
        assert models.get_model(str(created["id"]))["name"] == "mnist-cnn"  # digits: the id
        models.create_model("Other", description="text classifier", labels=["nlp"])

        for bad, problem in [
            ("  ", "cannot be blank"),
            ("a  b", "excessive spacing"),
            ("a/b", "slashes"),
            ("123", "only numbers"),
            ("..", "no URL can name it"),
            (".", "no URL can name it"),
            ("a\x00b", "control characters"),
        ]:
            with pytest.raises(errors.InvalidRequest, match=problem):
                models.create_model(bad)
        with pytest.raises(errors.Conflict, match="'mnist-cnn' already exists"):
            models.create_model("mnist-cnn")
        # Unique in any case, as in Determined; names are kept as written.
        with pytest.raises(errors.Conflict, match="'mnist-cnn' already exists"):
            models.create_model("MNIST-CNN")
        assert models.create_model("MNIST-RNN")["name"] == "MNIST-RNN"
        with pytest.raises(errors.InvalidRequest, match="labels: expected a list"):
            models.create_model("bad-labels", labels="cv")
        with pytest.raises(errors.NotFound, match="model 'nope' not found"):
            models.get_model("nope")
        with pytest.raises(errors.NotFound, match="model 99 not found"):
            models.get_model(99)

        def names(**filters) -> list[str]:
            return [m["name"] for m in models.list_models(**filters)]

        assert names() == ["MNIST-RNN", "Other", "mnist-cnn"]  # by name, as SQLite compares
        assert names(order_by="desc") == ["mnist-cnn", "Other", "MNIST-RNN"]
        assert names(name="mnist") == ["MNIST-RNN", "mnist-cnn"]
        assert names(description="TEXT") == ["Other"]
        assert names(labels=["cv", "small"]) == ["mnist-cnn"]
        assert names(labels=["cv", "nlp"]) == []
        assert names(model_id=created["id"]) == ["mnist-cnn"]
        assert models.model_labels() == ["cv", "nlp", "small"]

        edited = models.patch_model("mnist-cnn", {"name": "mnist", "metadata": {"b": 2}})
        assert (edited["name"], edited["metadata"], edited["description"]) == (
            "mnist",
            {"b": 2},
            "digits",
        )
        with pytest.raises(errors.Conflict, match="'Other' already exists"):
            models.patch_model("mnist", {"name": "Other"})
        assert models.set_archived("mnist", True)["archived"] is True
        assert names(archived=True) == ["mnist"]
        with pytest.raises(errors.Conflict, match="archived and cannot have attributes updated"):
            models.patch_model("mnist", {"description": "x"})
        assert models.set_archived("mnist", False)["archived"] is False
        models.delete_model("mnist")
        with pytest.raises(errors.NotFound):
            models.get_model("mnist")

    run_with_parts(tmp_path / "root", body)


def test_versions_are_numbered_and_name_a_completed_checkpoint(tmp_path):
    async def body(parts: Parts, _runner: FakeRunner) -> None:
        store = parts.shared.store
        first, second = finished_experiment(
            store, tmp_path / "ckpts", {1: None, 2: None}, keep=LATEST_ONLY
        )
        models = parts.models
        models.create_model("m")
        one = models.register_version("m", first, name="first", metadata={"k": 1})
        assert (one["version"], one["checkpoint_uuid"], one["name"]) == (1, first, "first")
        assert one["checkpoint"]["uuid"] == first and one["checkpoint"]["steps_completed"] == 1
        two = models.register_version("m", second, comment="better")
        assert two["version"] == 2 and models.get_model("m")["num_versions"] == 2
        assert [v["version"] for v in models.list_versions("m", order_by="desc")] == [2, 1]

        with pytest.raises(errors.NotFound, match="checkpoint nope not found"):
            models.register_version("m", "nope")
        with pytest.raises(errors.InvalidRequest, match="checkpoint_uuid: required"):
            models.register_version("m", "")
        with pytest.raises(
            errors.NotFound, match=r"model 'm' has no version 7 \(its versions: 1, 2\)"
        ):
            models.get_version("m", 7)

        patched = models.patch_version("m", 1, {"notes": "readme", "labels": ["prod"]})
        assert (patched["notes"], patched["labels"], patched["name"]) == (
            "readme",
            ["prod"],
            "first",
        )
        models.delete_version("m", 2)
        assert [v["version"] for v in models.list_versions("m")] == [1]

        store.checkpoints.mark_deleted(second)
        with pytest.raises(errors.Conflict, match="must be in a COMPLETED state"):
            models.register_version("m", second)
        models.set_archived("m", True)
        with pytest.raises(errors.Conflict, match="archived and cannot register new versions"):
            models.register_version("m", first)

    run_with_parts(tmp_path / "root", body)


def test_gc_and_deletion_keep_a_registered_checkpoint(tmp_path):
    async def body(parts: Parts, _runner: FakeRunner) -> None:
        store = parts.shared.store
        storage = tmp_path / "ckpts"
        registered, unregistered, latest = finished_experiment(
            store, storage, {1: None, 2: None, 3: None}, keep=LATEST_ONLY
        )
        parts.models.create_model("keeper")
        parts.models.register_version("keeper", registered)
        assert parts.checkpoints.registered_uuids([registered, unregistered, latest]) == {
            registered
        }

        gc = CheckpointCollector(store, on_deleted=lambda uuid: None)
        gc.collect_pending()
        # The policy keeps only the latest; the registered one stays too, files and all.
        # (A deleted directory may still sit in the trash, renamed, while a thread removes it.)
        left = [p.name for p in storage.iterdir() if not p.name.startswith(TRASH_PREFIX)]
        assert sorted(left) == sorted([registered, latest])
        assert (storage / registered / "weights").read_text() == "1"
        assert store.checkpoints.get(registered).state == "COMPLETED"
        assert store.checkpoints.get(unregistered).state == "DELETED"
        assert store.experiments.awaiting_checkpoint_gc() == []  # kept, not held back

        assert parts.models.checkpoint_versions(registered) == [
            {"model_id": 1, "model_name": "keeper", "version": 1}
        ]
        assert parts.models.checkpoint_versions(latest) == []
        with pytest.raises(errors.NotFound):
            parts.models.checkpoint_versions("nope")
        # Whoever deleted files (a trial's Core API) cannot mark a registered one DELETED.
        with pytest.raises(errors.Conflict, match="registered in the model registry"):
            parts.checkpoints.mark_checkpoints_deleted([{"uuid": latest}, {"uuid": registered}])
        assert store.checkpoints.get(latest).state == "COMPLETED"  # all or none

        with pytest.raises(errors.Conflict) as refused:
            gc.delete_checkpoint(registered)
        assert "version 1 of model 'keeper'" in refused.value.message
        assert "delete those model versions first" in refused.value.message
        assert (storage / registered).is_dir()

        parts.models.delete_model("keeper")  # its versions go with it
        gc.delete_checkpoint(registered)
        assert not (storage / registered).exists()

    run_with_parts(tmp_path / "root", body)
