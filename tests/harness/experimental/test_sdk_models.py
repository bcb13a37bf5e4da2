"""The model registry through `determined.experimental.client`, against a real master-lite:
every Model and ModelVersion method, Determined's errors, and the promise that a registered
checkpoint's files survive checkpoint GC and deletion.

One experiment saves checkpoints at steps 1, 2 and 3, then waits for a file before it exits,
so the test registers the step-1 checkpoint while the experiment runs; when it ends, its GC
policy (keep the latest only) would delete steps 1 and 2.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import textwrap
import warnings

import pytest

import determined as det
from determined.common.api import errors
from determined.experimental import client
from determined.experimental.client import (
    CheckpointState,
    Determined,
    DownloadMode,
    ExperimentState,
    Model,
    ModelSortBy,
    ModelVersion,
    OrderBy,
)
from tests._support import MasterProcess, wait_until

pytestmark = pytest.mark.slow

TRAIN_PY = """
import os, pathlib, time
import determined as det

go = pathlib.Path(os.environ["REGISTRY_GO"])
with det.core.init() as core:
    for op in core.searcher.operations():
        saved = []
        for step in range(1, op.length + 1):
            core.train.report_validation_metrics(steps_completed=step, metrics={"loss": 1 / step})
            with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                (pathlib.Path(path) / "weights.txt").write_text(f"step {step}")
            saved.append(uuid)
        while not go.exists():
            time.sleep(0.1)
        # The test registered the first checkpoint meanwhile: the Core API must keep it.
        try:
            core.checkpoint.delete(saved[0])
            outcome = "deleted"
        except Exception as e:
            outcome = f"{type(e).__name__}: {e}"
        (go.parent / "delete-outcome").write_text(outcome)
        op.report_completed(1 / op.length)
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("registry-master")) as process:
        yield process


@pytest.fixture(scope="module")
def sdk(master) -> Determined:
    return Determined(master=master.url, token=master.token)


@pytest.fixture(scope="module")
def experiment(sdk, tmp_path_factory):
    """(experiment, checkpoints by step, the model with step 1 registered while it ran, what
    the trial's `core.checkpoint.delete()` of that checkpoint did afterwards)."""
    directory = tmp_path_factory.mktemp("registry-exp")
    (directory / "train.py").write_text(textwrap.dedent(TRAIN_PY))
    go = directory / "go"
    config = {
        "name": "registry",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 3}},
        "environment": {"environment_variables": [f"REGISTRY_GO={go}"]},
        "checkpoint_storage": {
            "save_experiment_best": 0,
            "save_trial_best": 0,
            "save_trial_latest": 1,
        },
    }
    exp = sdk.create_experiment(config, directory)
    checkpoints = wait_until(
        lambda: (lambda found: found if len(found) == 3 else None)(exp.list_checkpoints()),
        120,
        "the experiment's three checkpoints",
    )
    by_step = {c.training.steps_completed: c for c in checkpoints}
    model = sdk.create_model("registry-keeper", description="kept while registered")
    model.register_version(by_step[1].uuid)
    go.write_text("")
    assert exp.wait(interval=0.2) == ExperimentState.COMPLETED
    return exp, by_step, model, (directory / "delete-outcome").read_text()


def test_create_get_and_list_models(sdk):
    made = sdk.create_model(
        "sdk-model", description="a classifier", metadata={"owner": "ml"}, labels=["cv"]
    )
    assert isinstance(made, Model) and made.model_id is not None
    assert (made.name, made.description, made.metadata, made.labels) == (
        "sdk-model",
        "a classifier",
        {"owner": "ml"},
        ["cv"],
    )
    assert made.archived is False and isinstance(made.creation_time, datetime.datetime)
    assert repr(made) == f'Model(id={made.model_id}, name=sdk-model, metadata={{"owner": "ml"}})'

    by_name = sdk.get_model("sdk-model")
    by_id = sdk.get_model(made.model_id)
    assert by_name.model_id == by_id.model_id == made.model_id
    with pytest.warns(FutureWarning):
        assert sdk.get_model_by_id(made.model_id).name == "sdk-model"

    sdk.create_model("sdk-other", description="text", labels=["nlp", "cv"])
    names = [m.name for m in sdk.list_models(name="sdk-")]
    assert names == ["sdk-model", "sdk-other"]
    assert [m.name for m in sdk.list_models(name="sdk-", order_by=OrderBy.DESC)] == [
        "sdk-other",
        "sdk-model",
    ]
    assert [m.name for m in sdk.list_models(description="TEXT")] == ["sdk-other"]
    assert [m.name for m in sdk.list_models(labels=["cv", "nlp"])] == ["sdk-other"]
    assert [m.name for m in sdk.list_models(model_id=made.model_id)] == ["sdk-model"]
    newest = sdk.list_models(sort_by=ModelSortBy.CREATION_TIME, order_by=OrderBy.DESC)
    assert newest[0].name == "sdk-other"
    with pytest.warns(FutureWarning):
        assert "sdk-model" in [m.name for m in sdk.get_models()]
    assert {"cv", "nlp"} <= set(sdk.get_model_labels())


def test_model_errors_are_determined_s(sdk):
    sdk.create_model("taken")
    with pytest.raises(errors.APIException, match="'taken' already exists") as taken:
        sdk.create_model("taken")
    assert taken.value.status_code == 409
    with pytest.raises(errors.APIException, match="cannot be only numbers") as digits:
        sdk.create_model("2024")
    assert digits.value.status_code == 400
    with pytest.raises(errors.NotFoundException, match="model 'missing' not found"):
        sdk.get_model("missing")
    with pytest.raises(errors.NotFoundException, match="model 987654 not found"):
        sdk.get_model(987654)
    model = sdk.get_model("taken")
    with pytest.raises(errors.NotFoundException, match="checkpoint no-such-uuid not found"):
        model.register_version("no-such-uuid")
    model.delete()
    with pytest.raises(errors.NotFoundException, match="model .* not found"):
        model.reload()


def test_edit_archive_and_delete_a_model(sdk):
    model = sdk.create_model("editable", metadata={"a": 1, "b": 2})
    model.add_metadata({"c": 3, "a": 10})
    assert model.metadata == {"a": 10, "b": 2, "c": 3}
    model.remove_metadata(["b", "absent"])
    model.set_labels(["x", "y"])
    model.set_description("new words")
    fresh = sdk.get_model("editable")
    assert (fresh.metadata, fresh.labels, fresh.description) == (
        {"a": 10, "c": 3},
        ["x", "y"],
        "new words",
    )
    with pytest.raises(ValueError):
        model.remove_metadata("a")  # a string, not a list of keys

    model.archive()
    assert model.archived is True and sdk.get_model("editable").archived is True
    assert "editable" in [m.name for m in sdk.list_models(archived=True)]
    with pytest.raises(errors.APIException, match="archived and cannot") as refused:
        model.set_description("no")
    assert refused.value.status_code == 409
    model.unarchive()
    model.set_description("yes")
    assert sdk.get_model("editable").description == "yes"

    model.delete()
    with pytest.raises(errors.NotFoundException):
        sdk.get_model("editable")


def test_versions_round_trip_and_download(sdk, experiment, tmp_path):
    _exp, by_step, _keeper, _outcome = experiment
    model = sdk.create_model("versions")
    assert model.get_version() is None  # none yet
    first = model.register_version(by_step[3].uuid)
    second = model.register_version(by_step[3].uuid)
    assert isinstance(first, ModelVersion)
    assert (first.model_version, first.version, second.model_version) == (1, 1, 2)
    assert first.model_name == "versions" and first.model_id == model.model_id
    assert model.num_versions == 2

    latest = model.get_version()
    assert latest is not None and latest.model_version == 2
    assert latest.checkpoint is not None and latest.checkpoint.uuid == by_step[3].uuid
    assert latest.checkpoint.state == CheckpointState.COMPLETED
    assert latest.checkpoint.training.steps_completed == 3
    path = latest.checkpoint.download(str(tmp_path / "v2"), mode=DownloadMode.MASTER)
    assert (pathlib.Path(path) / "weights.txt").read_text() == "step 3"

    assert [v.model_version for v in model.list_versions()] == [2, 1]
    assert [v.model_version for v in model.list_versions(OrderBy.ASC)] == [1, 2]
    with pytest.warns(FutureWarning):
        assert [v.model_version for v in model.get_versions()] == [2, 1]

    first.set_name("baseline")
    first.set_notes("trained on 3 batches")
    first.set_metadata({"accuracy": 0.9})
    again = model.get_version(1)
    assert (again.name, again.notes, again.metadata) == (
        "baseline",
        "trained on 3 batches",
        {"accuracy": 0.9},
    )
    with pytest.raises(errors.NotFoundException, match=r"has no version 5 \(its versions: 1, 2\)"):
        model.get_version(5)
    with pytest.raises(NotImplementedError):
        list(again.iter_metrics())

    second.delete()
    assert [v.model_version for v in model.list_versions()] == [1]
    with pytest.raises(errors.NotFoundException):
        second.reload()


def test_a_registered_checkpoint_survives_gc_and_refuses_deletion(sdk, experiment):
    _exp, by_step, keeper, core_delete = experiment
    # The trial's own Core API deletion was refused before it touched the files.
    assert core_delete.startswith("APIError: checkpoint "), core_delete
    assert "registered in the model registry (version 1 of model 'registry-keeper')" in core_delete
    registered = sdk.get_checkpoint(by_step[1].uuid)
    gone = sdk.get_checkpoint(by_step[2].uuid)
    # The GC policy kept only the latest (step 3): step 2 went, step 1 stayed registered.
    assert gone.state == CheckpointState.DELETED
    assert not pathlib.Path(gone.storage_path).exists()
    assert registered.state == CheckpointState.COMPLETED
    assert (pathlib.Path(registered.storage_path) / "weights.txt").read_text() == "step 1"

    with pytest.raises(errors.APIException, match="registered in the model registry") as refused:
        registered.delete()
    assert refused.value.status_code == 409
    assert "version 1 of model 'registry-keeper'" in str(refused.value)
    assert pathlib.Path(registered.storage_path).is_dir()

    keeper.get_version(1).delete()
    registered.delete()
    assert registered.state == CheckpointState.DELETED
    assert not pathlib.Path(registered.storage_path).exists()
    with pytest.raises(errors.APIException, match="must be in a COMPLETED state"):
        keeper.register_version(registered.uuid)


def test_module_functions_and_det_experimental_names(master, monkeypatch):
    monkeypatch.setattr(client, "_determined", None)
    monkeypatch.setenv("DET_MASTER", master.url)
    monkeypatch.setenv("DET_MASTER_TOKEN", master.token)
    made = client.create_model("module-made", labels=["m"])
    assert client.get_model("module-made").model_id == made.model_id
    assert "module-made" in [m.name for m in client.list_models(labels=["m"])]
    assert "m" in client.get_model_labels()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert client.get_model_by_id(made.model_id).name == "module-made"
        assert "module-made" in [m.name for m in client.get_models()]
    assert det.experimental.Model is Model and det.experimental.ModelVersion is ModelVersion
    assert det.experimental.ModelSortBy is ModelSortBy
    assert det.experimental.model.Model is Model
    assert json.loads(json.dumps(made.metadata)) == {}
