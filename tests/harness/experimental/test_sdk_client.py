"""`determined.experimental.client` (the Python SDK) end to end, against a real master-lite.

Every experiment here is created with the SDK (a config dict and a model directory), and every
read, action and download goes through the SDK's objects, as a user's notebook would.
"""

from __future__ import annotations

import json
import pathlib
import textwrap
import warnings

import pytest

import determined as det
from determined.common import api
from determined.common.api import errors
from determined.experimental import client
from determined.experimental.client import (
    CheckpointSortBy,
    CheckpointState,
    Determined,
    DownloadMode,
    ExperimentState,
    OrderBy,
    TrialState,
)
from tests._support import MasterProcess, wait_until

pytestmark = pytest.mark.slow

# Three steps; training loss 1/step every step, validation at steps 1 and 3, a checkpoint at
# every step (the one of step 2 has no validation at its step).
TRAIN_PY = """
import pathlib
import determined as det

print("hello from the sdk test", flush=True)
with det.core.init() as core:
    for op in core.searcher.operations():
        for step in range(1, op.length + 1):
            loss = 1.0 / step
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
            if step != 2:
                core.train.report_validation_metrics(
                    steps_completed=step, metrics={"loss": loss}
                )
            with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                (pathlib.Path(path) / "weights.txt").write_text(f"step {step}")
        op.report_completed(loss)
print("done", flush=True)
"""

# Runs until preempted (pause, kill): a training report every 0.1 s, a checkpoint on preemption.
LONG_PY = """
import pathlib, time
import determined as det

info = det.get_cluster_info()
with det.core.init() as core:
    start = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            start = int((pathlib.Path(path) / "step").read_text())
    print(f"starting at {start}", flush=True)
    for step in range(start + 1, 1_000_000):
        time.sleep(0.1)
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        if core.preempt.should_preempt():
            with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                (pathlib.Path(path) / "step").write_text(str(step))
            print(f"preempted at {step}", flush=True)
            break
"""


def config(name: str, length: int) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "hyperparameters": {"lr": 0.1},
        "searcher": {
            "name": "single",
            "metric": "loss",
            "smaller_is_better": True,
            "max_length": {"batches": length},
        },
        # Keep every checkpoint when the experiment ends (the default GC keeps best + latest).
        "checkpoint_storage": {"save_trial_best": 10, "save_trial_latest": 10},
    }


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("sdk-master")) as process:
        yield process


@pytest.fixture(scope="module")
def sdk(master) -> Determined:
    return Determined(master=master.url, token=master.token)


def model_dir(tmp_path: pathlib.Path, script: str) -> pathlib.Path:
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "train.py").write_text(textwrap.dedent(script))
    return directory


@pytest.fixture(scope="module")
def finished(sdk, tmp_path_factory):
    """An experiment created with the SDK and waited for with `wait()`."""
    exp = sdk.create_experiment(
        config("sdk-finished", 3), model_dir(tmp_path_factory.mktemp("finished"), TRAIN_PY)
    )
    assert exp.wait(interval=0.2) == ExperimentState.COMPLETED, list(
        exp.list_trials()[0].iter_logs()
    )
    return exp


def test_create_and_wait_sets_the_terminal_state(finished):
    assert finished.state == ExperimentState.COMPLETED
    assert finished.name == "sdk-finished"
    assert finished.config["searcher"]["metric"] == "loss"
    assert finished.progress == pytest.approx(1.0)
    assert repr(finished) == f"Experiment(id={finished.id})"


def test_get_and_list_experiments(sdk, finished):
    got = sdk.get_experiment(finished.id)
    assert got.id == finished.id and got.state == ExperimentState.COMPLETED
    assert got.config["hyperparameters"]["lr"] == {"type": "const", "val": 0.1}

    assert [e.id for e in sdk.list_experiments(experiment_ids=[finished.id])] == [finished.id]
    completed = sdk.list_experiments(states=[ExperimentState.COMPLETED])
    assert finished.id in [e.id for e in completed]
    both = sdk.list_experiments(states=[ExperimentState.COMPLETED, ExperimentState.ACTIVE])
    assert finished.id in [e.id for e in both]
    assert finished.id not in [e.id for e in sdk.list_experiments(states=[ExperimentState.ERROR])]
    assert finished.id in [e.id for e in sdk.list_experiments(name="sdk-fin")]
    assert sdk.list_experiments(name="no-such-name") == []
    newest_first = sdk.list_experiments(order_by=OrderBy.DESC)
    ids = [e.id for e in newest_first]
    assert ids == sorted(ids, reverse=True)
    # A listed experiment reads its config on first use.
    listed = sdk.list_experiments(experiment_ids=[finished.id])[0]
    assert listed.config["searcher"]["metric"] == "loss"


def test_archive_and_unarchive(sdk, finished):
    finished.archive()
    assert finished.archived is True
    assert finished.id not in [e.id for e in sdk.list_experiments(archived=False)]
    assert finished.id in [e.id for e in sdk.list_experiments(archived=True)]
    finished.unarchive()
    assert finished.archived is False
    assert finished.id in [e.id for e in sdk.list_experiments(archived=False)]


def test_trials(sdk, finished):
    trials = finished.list_trials()
    assert len(trials) == 1
    trial = trials[0]
    assert trial.state == TrialState.COMPLETED
    assert trial.hparams == {"lr": 0.1}
    assert trial.experiment_id == finished.id
    with pytest.warns(FutureWarning):
        assert [t.id for t in finished.get_trials()] == [trial.id]
    again = sdk.get_trial(trial.id)
    assert again.steps_completed == 3 and again.get_experiment().id == finished.id
    assert finished.await_first_trial().id == trial.id


def test_checkpoints_sorted_and_top(finished):
    checkpoints = finished.list_checkpoints()
    # Searcher metric (loss, smaller is better) first; the step without a validation last.
    assert [c.training.steps_completed for c in checkpoints] == [3, 1, 2]
    best = checkpoints[0]
    assert best.state == CheckpointState.COMPLETED
    assert best.metadata["steps_completed"] == 3
    assert best.training.experiment_id == finished.id
    assert best.training.validation_metrics["avgMetrics"]["loss"] == pytest.approx(1 / 3)
    assert best.training.hparams == {"lr": 0.1}
    assert best.training.experiment_config["searcher"]["metric"] == "loss"
    assert checkpoints[2].training.validation_metrics == {}

    with pytest.warns(FutureWarning):
        assert finished.top_checkpoint().uuid == best.uuid
    with pytest.warns(FutureWarning):
        worst = finished.top_checkpoint(sort_by="loss", smaller_is_better=False)
    assert worst.training.steps_completed == 1

    by_steps = finished.list_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.DESC)
    assert [c.training.steps_completed for c in by_steps] == [3, 2, 1]
    assert len(finished.list_checkpoints(max_results=2)) == 2
    with pytest.raises(AssertionError):
        finished.list_checkpoints(sort_by="loss")

    trial = finished.list_trials()[0]
    with pytest.warns(FutureWarning):
        assert trial.top_checkpoint().uuid == best.uuid
    assert [c.uuid for c in trial.list_checkpoints()] == [c.uuid for c in checkpoints]


def test_download_directly_through_the_master_and_by_default(sdk, finished, tmp_path, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        best = finished.top_checkpoint()
    fetched = sdk.get_checkpoint(best.uuid)
    assert fetched.uuid == best.uuid and fetched.training.trial_id == best.training.trial_id

    direct = fetched.download(str(tmp_path / "direct"), mode=DownloadMode.DIRECT)
    via_master = fetched.download(str(tmp_path / "via"), mode=DownloadMode.MASTER)
    for path in (direct, via_master):
        assert (pathlib.Path(path) / "weights.txt").read_text() == "step 3"
        metadata = json.loads((pathlib.Path(path) / "metadata.json").read_text())
        assert metadata["steps_completed"] == 3
    assert direct == str(tmp_path / "direct")

    # The default is the user's cache, outside the current directory (a notebook's context):
    # nothing lands where the next experiment would pack it.
    monkeypatch.chdir(tmp_path / "direct")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    default = fetched.download()
    assert default == str(tmp_path / "cache" / "determined" / "checkpoints" / best.uuid)
    assert (pathlib.Path(default) / "weights.txt").read_text() == "step 3"
    assert not (tmp_path / "direct" / "checkpoints").exists()
    # Without XDG_CACHE_HOME: ~/.cache.
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert fetched.download() == str(
        tmp_path / "home" / ".cache" / "determined" / "checkpoints" / best.uuid
    )
    # Determined's own default, asked for by name, is exactly Determined's.
    relative = fetched.download(f"checkpoints/{best.uuid}")
    assert relative == str(pathlib.Path("checkpoints", best.uuid))
    assert (tmp_path / "direct" / "checkpoints" / best.uuid / "weights.txt").exists()


def test_checkpoint_metadata(sdk, finished):
    checkpoint = finished.list_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.ASC)[0]
    checkpoint.add_metadata({"framework": "none", "steps_completed": 1})
    checkpoint.add_metadata({"note": "first"})
    assert sdk.get_checkpoint(checkpoint.uuid).metadata == {
        "framework": "none",
        "note": "first",
        "steps_completed": 1,
    }
    checkpoint.remove_metadata(["framework", "not-there"])
    assert checkpoint.metadata == {"note": "first", "steps_completed": 1}
    assert sdk.get_checkpoint(checkpoint.uuid).metadata == checkpoint.metadata
    with pytest.raises(errors.NotFoundException, match="checkpoint gone not found"):
        client.Checkpoint(sdk._session, "gone").add_metadata({"a": 1})


def test_logs(finished):
    trial = finished.list_trials()[0]
    lines = list(trial.iter_logs())
    assert any("hello from the sdk test" in line for line in lines)
    assert all(line.endswith("\n") for line in lines)
    with pytest.warns(FutureWarning):
        assert list(trial.logs()) == lines
    assert list(trial.iter_logs(head=2)) == lines[:2]
    assert list(trial.iter_logs(tail=1)) == lines[-1:]
    assert list(trial.iter_logs(search_text="hello from")) == [
        line for line in lines if "hello from" in line
    ]
    # Following a finished trial ends at its last line.
    assert list(trial.iter_logs(follow=True)) == lines
    with pytest.raises(ValueError):
        list(trial.iter_logs(follow=True, tail=3))


def test_iter_metrics(sdk, finished):
    trial = finished.list_trials()[0]
    training = list(trial.iter_metrics("training"))
    assert [m.steps_completed for m in training] == [1, 2, 3]
    assert training[0].metrics == {"loss": 1.0}
    assert training[0].group == "training" and training[0].trial_id == trial.id
    assert training[0].end_time.tzinfo is not None
    validation = list(sdk.iter_trials_metrics([trial.id], group="validation"))
    assert [m.steps_completed for m in validation] == [1, 3]


def test_unknown_ids_raise_not_found_naming_them(sdk):
    with pytest.raises(errors.NotFoundException, match="experiment 987654 not found"):
        sdk.get_experiment(987654)
    with pytest.raises(errors.NotFoundException, match="trial 987654 not found"):
        sdk.get_trial(987654)
    with pytest.raises(api.NotFound, match="checkpoint no-such-uuid not found") as raised:
        sdk.get_checkpoint("no-such-uuid")
    assert isinstance(raised.value, errors.APIException) and raised.value.status_code == 404
    with pytest.raises(errors.NotFoundException):
        list(client.Trial(987654, sdk._session).iter_logs())


def test_name_description_and_labels(sdk, finished):
    try:
        finished.set_name("sdk-renamed")
        finished.set_description("what it is")
        finished.set_notes("## Findings\nlr 0.1 is best")
        assert finished.notes == "## Findings\nlr 0.1 is best"
        assert sdk.get_experiment(finished.id).notes == "## Findings\nlr 0.1 is best"
        finished.add_label("b")
        finished.add_label("a")
        finished.add_label("a")
        assert finished.labels == {"a", "b"}
        finished.remove_label("b")
        finished.remove_label("not-there")
        again = sdk.get_experiment(finished.id)
        assert (again.name, again.description, again.labels) == ("sdk-renamed", "what it is", {"a"})
        assert [e.id for e in sdk.list_experiments(labels=["a", "z"])] == [finished.id]
        assert sdk.list_experiments(labels=["z"]) == []
        finished.set_labels({"x", "y"})
        assert sdk.get_experiment(finished.id).labels == {"x", "y"}
        with pytest.raises(errors.APIException) as raised:
            finished.set_name("")
        assert raised.value.status_code == 400
    finally:
        finished.set_name("sdk-finished")
        finished.set_description("")
        finished.set_notes("")
        finished.set_labels(set())
    assert finished.labels is None and finished.name == "sdk-finished"


def test_what_the_master_lacks_raises_not_implemented(finished):
    # move_to_project works now (tests/cli/test_cli_workspaces.py); an unknown workspace is
    # a NotFoundException naming it.
    with pytest.raises(errors.NotFoundException, match="workspace 'w' not found"):
        finished.move_to_project("w", "p")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        best = finished.top_checkpoint()
    with pytest.raises(NotImplementedError, match="Checkpoint.remove_files"):
        best.remove_files(["*"])
    with pytest.raises(NotImplementedError, match="Checkpoint.get_metrics"):
        best.get_metrics("inference")


def test_delete_refuses_a_running_experiment_then_removes_it_with_its_files(sdk, master, tmp_path):
    running = sdk.create_experiment(config("sdk-doomed-long", 100), model_dir(tmp_path, LONG_PY))
    with pytest.raises(errors.APIException, match="only finished experiments") as raised:
        running.delete()
    assert raised.value.status_code == 409
    running.kill()
    assert running.wait(interval=0.2) == ExperimentState.CANCELED

    (tmp_path / "short").mkdir()
    doomed = sdk.create_experiment(config("sdk-doomed", 3), model_dir(tmp_path / "short", TRAIN_PY))
    assert doomed.wait(interval=0.2) == ExperimentState.COMPLETED
    uuids = [c.uuid for c in doomed.list_checkpoints()]
    files = [master.root_dir / "checkpoints" / uuid for uuid in uuids]
    assert len(files) == 3 and all(path.is_dir() for path in files)
    [trial] = doomed.list_trials()
    doomed.delete()
    running.delete()
    assert not any(path.exists() for path in files)
    for exp in (doomed, running):
        with pytest.raises(errors.NotFoundException):
            sdk.get_experiment(exp.id)
    with pytest.raises(errors.NotFoundException):
        sdk.get_trial(trial.id)
    with pytest.raises(errors.NotFoundException):
        sdk.get_checkpoint(uuids[0])


def test_module_functions_find_the_master_like_det(master, finished, monkeypatch):
    monkeypatch.setenv("DET_MASTER", master.url)
    monkeypatch.setenv("DET_MASTER_TOKEN", master.token)
    monkeypatch.setattr(client, "_determined", None)
    assert client.get_experiment(finished.id).state == ExperimentState.COMPLETED
    assert finished.id in [e.id for e in client.list_experiments()]
    with pytest.raises(ValueError, match="only call login"):
        client.login()
    client.logout()
    client.login(master=master.url)  # the token comes from DET_MASTER_TOKEN
    trial_id = client.get_experiment(finished.id).list_trials()[0].id
    assert client.get_trial(trial_id).id == trial_id
    client.logout()
    assert det.experimental.Determined is Determined
    assert det.experimental.client is client


def test_checkpoint_delete(sdk, finished):
    [unvalidated] = [c for c in finished.list_checkpoints() if c.training.validation_metrics == {}]
    files = pathlib.Path(unvalidated.storage_path)
    assert files.is_dir()
    unvalidated.delete()
    assert unvalidated.state == CheckpointState.DELETED
    assert not files.exists()
    assert sdk.get_checkpoint(unvalidated.uuid).state == CheckpointState.DELETED
    assert unvalidated.uuid not in [c.uuid for c in finished.list_checkpoints()]
    with pytest.raises(errors.APIException, match="is DELETED") as raised:
        unvalidated.delete()
    assert raised.value.status_code == 409


def test_pause_activate_and_kill_a_running_experiment(sdk, tmp_path):
    exp = sdk.create_experiment(config("sdk-long", 1_000_000), model_dir(tmp_path, LONG_PY))
    trial = exp.await_first_trial(interval=0.2)
    # Follow the training reports while it runs: the first arrives, the rest after the kill.
    reports = trial.iter_metrics("training")
    first = next(reports)
    assert first.steps_completed == 1

    exp.pause()
    wait_until(lambda: sdk.get_trial(trial.id).state == TrialState.PAUSED, 60, "the trial to pause")
    with pytest.raises(ValueError, match="paused"):
        exp.wait(interval=0.1)
    paused_at = sdk.get_trial(trial.id).steps_completed
    # The paused trial resumes from its latest checkpoint: that one cannot be deleted.
    latest = exp.list_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.DESC)[0]
    with pytest.raises(errors.APIException, match="in use") as raised:
        latest.delete()
    assert raised.value.status_code == 409
    assert any("preempted at" in line for line in trial.iter_logs())

    exp.activate()
    # Determined (0.2x+) reports an active experiment whose trial waits for slots as QUEUED.
    assert exp.state in (ExperimentState.QUEUED, ExperimentState.RUNNING)
    wait_until(
        lambda: (sdk.get_trial(trial.id).steps_completed or 0) > paused_at + 2,
        60,
        "the trial to resume",
    )
    exp.kill()
    assert exp.wait(interval=0.2) == ExperimentState.CANCELED
    rest = list(reports)  # ends: the trial is terminal
    steps = [first.steps_completed] + [r.steps_completed for r in rest]
    assert steps[-1] > paused_at
    assert sdk.get_trial(trial.id).state == TrialState.CANCELED
    assert any(f"starting at {paused_at}" in line for line in trial.iter_logs())
