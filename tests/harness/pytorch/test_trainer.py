"""det.pytorch.Trainer off the master: boundaries, metrics, callbacks, schedulers, checkpoints, resume.

The trials here train tiny models on a slice of sklearn's digits. Reports go to a recording
`core_context.train` (a DummyTrainContext that keeps what it was given) so the tests can assert
exactly what was reported at which step.
"""

from __future__ import annotations

import json
import pathlib
import pickle
from typing import Any

import pytest
import torch
from sklearn.datasets import load_digits

import determined
from determined import core, pytorch

torch.set_num_threads(1)

_DIGITS = load_digits()
X = torch.tensor(_DIGITS.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_DIGITS.target, dtype=torch.int64)


class RecordingTrain(core.DummyTrainContext):
    def __init__(self) -> None:
        self.training: list[tuple[int, dict]] = []
        self.validation: list[tuple[int, dict]] = []
        self.progress: list[float] = []

    def report_training_metrics(self, steps_completed, metrics, batch_metrics=None):
        super().report_training_metrics(steps_completed, metrics, batch_metrics)
        self.training.append((steps_completed, dict(metrics)))

    def report_validation_metrics(self, steps_completed, metrics):
        super().report_validation_metrics(steps_completed, metrics)
        self.validation.append((steps_completed, dict(metrics)))

    def report_progress(self, progress):
        self.progress.append(progress)


class Events(pytorch.PyTorchCallback):
    """Records every hook call; also keeps state across checkpoints."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.checkpoints: list[str] = []
        self.saved_counter = 0

    def on_trial_startup(self, first_batch_idx, checkpoint_uuid):
        self.events.append(("trial_startup", first_batch_idx))

    def on_trial_shutdown(self):
        self.events.append(("trial_shutdown",))

    def on_training_start(self):
        self.events.append(("training_start",))

    def on_training_epoch_start(self, epoch_idx):
        self.events.append(("epoch_start", epoch_idx))

    def on_training_epoch_end(self, epoch_idx):
        self.events.append(("epoch_end", epoch_idx))

    def on_training_workload_end(self, avg_metrics, batch_metrics):
        self.events.append(("workload_end", avg_metrics["batches"], len(batch_metrics)))

    def on_validation_start(self):
        self.events.append(("validation_start",))

    def on_validation_epoch_start(self):
        self.events.append(("validation_epoch_start",))

    def on_validation_epoch_end(self, outputs):
        self.events.append(("validation_epoch_end", len(outputs)))

    def on_validation_end(self, metrics):
        self.events.append(("validation_end", metrics["batches"]))

    def on_checkpoint_save_start(self, checkpoint):
        self.events.append(("checkpoint_save_start",))

    def on_checkpoint_write_end(self, checkpoint_dir):
        self.events.append(("checkpoint_write_end",))

    def on_checkpoint_upload_end(self, uuid):
        self.events.append(("checkpoint_upload_end",))
        self.checkpoints.append(uuid)

    def on_checkpoint_load_start(self, checkpoint):
        self.events.append(("checkpoint_load_start",))

    def state_dict(self):
        return {"counter": len(self.checkpoints)}

    def load_state_dict(self, state_dict):
        self.saved_counter = state_dict["counter"]


class DigitsTrial(pytorch.PyTorchTrial):
    """Linear + dropout on 64 digits (16 batches of 16 per epoch by default)."""

    def __init__(
        self,
        context: pytorch.PyTorchTrialContext,
        *,
        samples: int = 256,
        shuffle: bool = True,
        stop_at: int | None = None,
    ) -> None:
        self.context = context
        self.samples = samples
        self.shuffle = shuffle
        self.stop_at = stop_at
        self.model = context.wrap_model(
            torch.nn.Sequential(torch.nn.Dropout(0.2), torch.nn.Linear(64, 10))
        )
        self.optimizer = context.wrap_optimizer(
            torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        )
        self.scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=7, gamma=0.5),
            pytorch.LRScheduler.StepMode.STEP_EVERY_BATCH,
        )
        self.events = Events()

    def build_callbacks(self):
        return {"events": self.events}

    def build_training_data_loader(self):
        data = torch.utils.data.TensorDataset(X[: self.samples], Y[: self.samples])
        return pytorch.DataLoader(
            data, batch_size=self.context.get_per_slot_batch_size(), shuffle=self.shuffle
        )

    def build_validation_data_loader(self):
        data = torch.utils.data.TensorDataset(X[1500:1600], Y[1500:1600])
        return pytorch.DataLoader(data, batch_size=25)

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        if self.stop_at is not None and batch_idx == self.stop_at:
            self.context.set_stop_requested(True)
        return {"loss": loss, "batch_idx": batch_idx, "epoch_idx": epoch_idx}

    def evaluate_batch(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        return {"validation_loss": torch.nn.functional.cross_entropy(logits, y), "count": len(y)}


def _exp_conf(tmp_path: pathlib.Path, **extra: Any) -> dict:
    return {
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": str(tmp_path),
            "storage_path": "ckpts",
        },
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True},
        **extra,
    }


def _run(
    tmp_path,
    trial_cls=DigitsTrial,
    *,
    seed=0,
    hparams=None,
    trial_kwargs=None,
    exp_conf=None,
    **fit,
):
    """Build a fresh context + trial (seeded like a trial process would be) and fit it."""
    torch.manual_seed(seed)
    with pytorch.init(
        hparams=hparams or {"global_batch_size": 16}, exp_conf=exp_conf or _exp_conf(tmp_path)
    ) as context:
        recorder = RecordingTrain()
        context._core.train = recorder
        trial = trial_cls(context, **(trial_kwargs or {}))
        pytorch.Trainer(trial, context).fit(**fit)
    return trial, recorder


def _ckpt_dir(tmp_path, uuid):
    return tmp_path / "ckpts" / uuid


# --- lengths and periods -------------------------------------------------------------------------
def test_batch_max_length_with_container_periods(tmp_path):
    trial, rec = _run(
        tmp_path,
        max_length=pytorch.Batch(10),
        validation_period=pytorch.Batch([3, 7]),
        checkpoint_period=pytorch.Batch([5]),
        reporting_period=pytorch.Batch(4),
        checkpoint_policy="none",
    )
    # Training metrics at every boundary (validation 3, 7; checkpoint 5; report 4, 8; train 10).
    assert [s for s, _ in rec.training] == [3, 4, 5, 7, 8, 10]
    # Averages of the batches since the previous boundary (batch_idx is 0-based).
    assert [m["batch_idx"] for _, m in rec.training] == [1.0, 3.0, 4.0, 5.5, 7.0, 8.5]
    assert [m["batches"] for _, m in rec.training] == [3, 4, 5, 7, 8, 10]
    # Validation at 3 and 7, then at the end (10 was stale).
    assert [s for s, _ in rec.validation] == [3, 7, 10]
    # Checkpoints at the checkpoint boundary and at the end (policy "none": none after validations).
    saved = [
        json.loads((_ckpt_dir(tmp_path, u) / "metadata.json").read_text())["steps_completed"]
        for u in trial.events.checkpoints
    ]
    assert saved == [5, 10]
    assert rec.progress == [pytest.approx(0.4), pytest.approx(0.8), pytest.approx(1.0)]


def test_epoch_max_length_and_epoch_periods(tmp_path):
    # 64 samples / 16 = 4 batches per epoch.
    trial, rec = _run(
        tmp_path,
        trial_kwargs={"samples": 64},
        max_length=pytorch.Epoch(3),
        validation_period=pytorch.Epoch(1),
        checkpoint_policy="none",
    )
    assert [(s, m["epochs"]) for s, m in rec.training] == [(4, 1), (8, 2), (12, 3)]
    assert [(s, m["batches"], m["epochs"]) for s, m in rec.validation] == [
        (4, 4, 1),
        (8, 8, 2),
        (12, 12, 3),
    ]
    assert [m["epoch_idx"] for _, m in rec.training] == [0.0, 1.0, 2.0]
    assert len(trial.events.checkpoints) == 1  # only the final one


def test_local_best_policy_checkpoints_after_every_validation(tmp_path):
    trial, rec = _run(tmp_path, max_length=pytorch.Batch(6), validation_period=pytorch.Batch(2))
    steps = [
        json.loads((_ckpt_dir(tmp_path, u) / "metadata.json").read_text())["steps_completed"]
        for u in trial.events.checkpoints
    ]
    assert steps == [2, 4, 6]


def test_max_length_must_be_a_batch_or_epoch_int(tmp_path):
    with pytest.raises(TypeError):
        _run(tmp_path, max_length=10)
    with pytest.raises(TypeError):
        _run(tmp_path, max_length=pytorch.Batch([5]))
    with pytest.raises(ValueError, match="max_length"):
        _run(tmp_path)


def test_test_mode_trains_one_batch_and_validates(tmp_path):
    trial, rec = _run(tmp_path, max_length=pytorch.Epoch(5), test_mode=True)
    assert [s for s, _ in rec.training] == [1]
    assert [s for s, _ in rec.validation] == [1]
    assert len(trial.events.checkpoints) == 1


def test_step_zero_validation(tmp_path):
    _, rec = _run(
        tmp_path, max_length=pytorch.Batch(2), step_zero_validation=True, checkpoint_policy="none"
    )
    assert [s for s, _ in rec.validation] == [0, 2]


def test_stop_requested_checkpoints_and_returns(tmp_path):
    trial, rec = _run(
        tmp_path,
        trial_kwargs={"stop_at": 5},
        max_length=pytorch.Batch(50),
        reporting_period=pytorch.Batch(1),
        checkpoint_policy="none",
    )
    assert rec.training[-1][0] == 6
    assert rec.validation == []  # exiting early does not validate
    meta = json.loads(
        (_ckpt_dir(tmp_path, trial.events.checkpoints[-1]) / "metadata.json").read_text()
    )
    assert meta["steps_completed"] == 6


# --- validation metrics and reducers --------------------------------------------------------------
class CountingReducer(pytorch.MetricReducer):
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.seen: list[int] = []

    def update(self, labels: torch.Tensor) -> None:
        self.seen.extend(labels.tolist())

    def per_slot_reduce(self) -> Any:
        return len(self.seen), sum(self.seen)

    def cross_slot_reduce(self, per_slot_metrics) -> Any:
        return {
            "seen": sum(n for n, _ in per_slot_metrics),
            "label_sum": sum(s for _, s in per_slot_metrics),
        }


class ReducerTrial(DigitsTrial):
    def __init__(self, context, **kwargs):
        super().__init__(context, **kwargs)
        self.counter = context.wrap_reducer(CountingReducer(), for_training=False)

    def evaluate_batch(self, batch, batch_idx):
        x, y = batch
        self.counter.update(y)
        return {"validation_loss": 1.0, "n": len(y), "first": float(y[0]), "idx": batch_idx}

    def evaluation_reducer(self):
        return {
            "validation_loss": pytorch.Reducer.AVG,
            "n": pytorch.Reducer.SUM,
            "first": pytorch.Reducer.MAX,
            "idx": pytorch.Reducer.MIN,
        }


def test_evaluation_reducers_and_custom_metric_reducer(tmp_path):
    _, rec = _run(tmp_path, ReducerTrial, max_length=pytorch.Batch(1), checkpoint_policy="none")
    ((steps, metrics),) = rec.validation
    labels = Y[1500:1600]
    assert metrics["n"] == 100  # SUM over 4 batches of 25
    assert metrics["first"] == max(float(labels[i]) for i in (0, 25, 50, 75))
    assert metrics["idx"] == 0
    assert metrics["validation_loss"] == 1.0
    assert metrics["seen"] == 100 and metrics["label_sum"] == int(labels.sum())


class SamplesSeen(CountingReducer):
    def per_slot_reduce(self) -> Any:
        return len(self.seen)

    def cross_slot_reduce(self, per_slot_metrics) -> Any:
        return sum(per_slot_metrics)


class TrainingReducerTrial(DigitsTrial):
    def __init__(self, context, **kwargs):
        super().__init__(context, **kwargs)
        self.seen = context.wrap_reducer(SamplesSeen(), name="samples_seen", for_validation=False)

    def train_batch(self, batch, epoch_idx, batch_idx):
        self.seen.update(batch[1])
        return super().train_batch(batch, epoch_idx, batch_idx)


def test_training_metric_reducer_is_reset_at_each_boundary(tmp_path):
    _, rec = _run(
        tmp_path,
        TrainingReducerTrial,
        max_length=pytorch.Batch(6),
        reporting_period=pytorch.Batch(4),
        checkpoint_policy="none",
    )
    assert [(s, m["samples_seen"]) for s, m in rec.training] == [(4, 64), (6, 32)]
    assert "samples_seen" not in rec.validation[0][1]


class FullDatasetTrial(DigitsTrial):
    evaluate_batch = pytorch.PyTorchTrial.evaluate_batch  # use evaluate_full_dataset instead

    def evaluate_full_dataset(self, data_loader):
        total = sum(len(y) for _, y in data_loader)
        return {"validation_loss": torch.tensor(0.5), "total": total}


def test_evaluate_full_dataset(tmp_path):
    _, rec = _run(tmp_path, FullDatasetTrial, max_length=pytorch.Batch(1), checkpoint_policy="none")
    assert rec.validation[0][1] == {"validation_loss": 0.5, "total": 100, "batches": 1, "epochs": 0}


def test_missing_searcher_metric_is_an_error(tmp_path):
    class NoMetric(DigitsTrial):
        def evaluate_batch(self, batch, batch_idx):
            return {"other": 1.0}

    with pytest.raises(RuntimeError, match="validation_loss"):
        _run(tmp_path, NoMetric, max_length=pytorch.Batch(1))


# --- callbacks ---------------------------------------------------------------------------------------
def test_callbacks_called_in_order(tmp_path):
    trial, _ = _run(
        tmp_path,
        trial_kwargs={"samples": 32},
        max_length=pytorch.Batch(3),
        validation_period=pytorch.Batch(2),
        checkpoint_policy="none",
    )
    validation = [("validation_start",), ("validation_epoch_start",), ("validation_epoch_end", 4)]
    checkpoint = [("checkpoint_save_start",), ("checkpoint_write_end",), ("checkpoint_upload_end",)]
    assert trial.events.events == [
        ("trial_startup", 0),
        ("training_start",),
        ("epoch_start", 0),
        ("epoch_end", 0),  # 32 samples / 16 = 2 batches per epoch
        ("workload_end", 2, 2),
        *validation,
        ("validation_end", 2),
        ("epoch_start", 1),
        ("workload_end", 3, 1),
        *validation,
        ("validation_end", 3),
        *checkpoint,
        ("trial_shutdown",),
    ]


# --- lr schedulers --------------------------------------------------------------------------------
class SchedulerTrial(pytorch.PyTorchTrial):
    """Five optimizers on one model, each with a scheduler in a different step mode."""

    MODES = {
        "every_batch": (pytorch.LRScheduler.StepMode.STEP_EVERY_BATCH, 1),
        "every_3_batches": (pytorch.LRScheduler.StepMode.STEP_EVERY_BATCH, 3),
        "every_epoch": (pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH, 1),
        "manual": (pytorch.LRScheduler.StepMode.MANUAL_STEP, 1),
        "every_optimizer_step": (pytorch.LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP, 1),
        "every_2_optimizer_steps": (pytorch.LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP, 2),
    }

    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(torch.nn.Linear(64, 10))
        self.optimizers = {}
        self.schedulers = {}
        for name, (mode, frequency) in self.MODES.items():
            opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.01))
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
            returned = context.wrap_lr_scheduler(sched, mode, frequency=frequency)
            assert returned is sched  # the unwrapped scheduler comes back
            self.optimizers[name], self.schedulers[name] = opt, sched

    def build_training_data_loader(self):
        return pytorch.DataLoader(
            torch.utils.data.TensorDataset(X[:64], Y[:64]), batch_size=16
        )  # 4 batches

    def build_validation_data_loader(self):
        return pytorch.DataLoader(torch.utils.data.TensorDataset(X[:16], Y[:16]), batch_size=16)

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        for opt in self.optimizers.values():
            self.context.step_optimizer(opt)
        return loss

    def evaluate_batch(self, batch, batch_idx):
        return {"validation_loss": 0.0}


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_lr_scheduler_step_modes_count_steps(tmp_path):
    torch.manual_seed(0)
    with pytorch.init(
        hparams={"global_batch_size": 16}, exp_conf=_exp_conf(tmp_path), aggregation_frequency=2
    ) as context:
        trial = SchedulerTrial(context)
        pytorch.Trainer(trial, context).fit(max_length=pytorch.Batch(10), checkpoint_policy="none")
    steps = {name: sched.last_epoch for name, sched in trial.schedulers.items()}
    # 10 batches = 2.5 epochs; aggregation_frequency 2 => 5 real optimizer steps.
    assert steps == {
        "every_batch": 10,
        "every_3_batches": 3,
        "every_epoch": 2,
        "manual": 0,
        "every_optimizer_step": 5,
        "every_2_optimizer_steps": 2,
    }


def test_wrap_lr_scheduler_requires_a_wrapped_optimizer_and_manual_plateau(tmp_path):
    with pytorch.init(hparams={"global_batch_size": 16}, exp_conf=_exp_conf(tmp_path)) as context:
        model = context.wrap_model(torch.nn.Linear(2, 2))
        loose = torch.optim.SGD(model.parameters(), lr=0.1)
        with pytest.raises(ValueError, match="wrap_optimizer"):
            context.wrap_lr_scheduler(
                torch.optim.lr_scheduler.StepLR(loose, 1),
                pytorch.LRScheduler.StepMode.STEP_EVERY_BATCH,
            )
        opt = context.wrap_optimizer(loose)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
        with pytest.raises(ValueError, match="MANUAL_STEP"):
            context.wrap_lr_scheduler(plateau, pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH)
        assert (
            context.wrap_lr_scheduler(plateau, pytorch.LRScheduler.StepMode.MANUAL_STEP) is plateau
        )


# --- context ------------------------------------------------------------------------------------------
def test_batch_size_getters(tmp_path):
    with pytorch.init(hparams={"lr": 0.1}, exp_conf=_exp_conf(tmp_path)) as context:
        with pytest.raises(ValueError, match="global_batch_size"):
            context.get_per_slot_batch_size()
        with pytest.raises(ValueError, match="global_batch_size"):
            context.get_global_batch_size()
        assert context.get_hparam("lr") == 0.1
        with pytest.raises(ValueError, match="nope"):
            context.get_hparam("nope")
        assert context.get_initial_batch() == 0
        assert context.get_data_config() == {}
    with pytorch.init(hparams={"global_batch_size": 24}) as context:
        assert (context.get_global_batch_size(), context.get_per_slot_batch_size()) == (24, 24)


def test_missing_global_batch_size_fails_the_fit(tmp_path):
    with pytest.raises(ValueError, match="global_batch_size"):
        _run(tmp_path, hparams={"lr": 1.0}, max_length=pytorch.Batch(1))


# --- checkpoints and resume ----------------------------------------------------------------------------
def test_checkpoint_contents_and_metadata(tmp_path):
    trial, _ = _run(tmp_path, max_length=pytorch.Batch(3), checkpoint_policy="none")
    (uuid,) = trial.events.checkpoints
    path = _ckpt_dir(tmp_path, uuid)
    assert sorted(p.name for p in path.iterdir()) == [
        "load_data.json",
        "metadata.json",
        "state_dict.pth",
        "trial_state.pkl",
    ]
    metadata = json.loads((path / "metadata.json").read_text())
    assert metadata == {
        "determined_version": determined.__version__,
        "steps_completed": 3,
        "framework": f"torch-{torch.__version__}",
        "format": "pickle",
    }
    state = torch.load(path / "state_dict.pth", weights_only=False)
    assert set(state) == {
        "models_state_dict",
        "optimizers_state_dict",
        "lr_schedulers_state_dict",
        "callbacks",
        "rng_state",
    }
    assert state["callbacks"] == {"events": {"counter": 0}}
    assert torch.equal(state["models_state_dict"][0]["1.weight"], trial.model[1].weight)
    load_data = json.loads((path / "load_data.json").read_text())
    assert load_data["trial_type"] == "PyTorchTrial" and load_data["is_trainer"] is True
    assert load_data["trial_cls_spec"] == f"{DigitsTrial.__module__}:DigitsTrial"
    assert load_data["hparams"] == {"global_batch_size": 16}
    with open(path / "trial_state.pkl", "rb") as f:
        assert pickle.load(f)["batches_trained"] == 3

    loaded = pytorch.load_trial_from_checkpoint_path(path)  # the class comes from trial_cls_spec
    assert type(loaded).__qualname__ == "DigitsTrial"
    assert torch.equal(loaded.model[1].weight, trial.model[1].weight)
    assert loaded.context.get_hparams() == {"global_batch_size": 16}


def test_resume_is_exact(tmp_path):
    """40 batches in one go == 20 batches, checkpoint, a fresh process-like Trainer for 20 more."""
    fit = dict(reporting_period=pytorch.Batch(1), checkpoint_policy="none")
    full, full_rec = _run(tmp_path, max_length=pytorch.Batch(40), **fit)
    first, first_rec = _run(
        tmp_path, max_length=pytorch.Batch(20), checkpoint_period=pytorch.Batch(10), **fit
    )
    second, second_rec = _run(
        tmp_path,
        max_length=pytorch.Batch(40),
        latest_checkpoint=first.events.checkpoints[-1],
        **fit,
    )
    losses = [m["loss"] for _, m in full_rec.training]
    assert len(losses) == 40
    assert [m["loss"] for _, m in first_rec.training + second_rec.training] == losses
    assert [s for s, _ in second_rec.training] == list(range(21, 41))
    for a, b in zip(full.model.parameters(), second.model.parameters(), strict=False):
        assert torch.equal(a, b)
    assert second.scheduler.last_epoch == full.scheduler.last_epoch == 40
    assert second.events.events[:2] == [("checkpoint_load_start",), ("trial_startup", 20)]
    assert (
        second.events.saved_counter == 1
    )  # callback state came back (1 checkpoint before the last)
    assert full_rec.validation[-1][1] == second_rec.validation[-1][1]


def test_resume_of_a_finished_run_trains_nothing(tmp_path):
    done, _ = _run(tmp_path, max_length=pytorch.Batch(4), checkpoint_policy="none")
    again, rec = _run(
        tmp_path, max_length=pytorch.Batch(4), latest_checkpoint=done.events.checkpoints[-1]
    )
    assert rec.training == [] and rec.validation == []
    assert again.events.checkpoints == []


# --- searcher operations (what the master drives for `model_def:Trial` entrypoints) -----------------
class FakeOperation:
    def __init__(self, length: int, completed: list) -> None:
        self.length = length
        self._completed = completed

    def report_completed(self, metric: float) -> None:
        self._completed.append((self.length, metric))


class FakeSearcher:
    """Two operations, as ASHA gives a promoted trial: train to 2 epochs, then to 3."""

    def __init__(self, lengths: list[int]) -> None:
        self.lengths = lengths
        self.completed: list = []

    def operations(self):
        for length in self.lengths:
            yield FakeOperation(length, self.completed)


def test_master_driven_operations_train_to_each_length(tmp_path):
    torch.manual_seed(0)
    config = _exp_conf(tmp_path)
    config["searcher"]["max_length"] = {"epochs": 3}
    core_context = core._dummy_init(checkpoint_storage=str(tmp_path / "ckpts"))
    core_context.train = recorder = RecordingTrain()
    core_context.searcher = searcher = FakeSearcher([2, 3])
    with core_context:
        # As det.pytorch.init() builds it on the master (managed training), over local contexts.
        context = pytorch.PyTorchTrialContext(
            core_context,
            trial_seed=0,
            hparams={"global_batch_size": 16},
            exp_conf=config,
            managed_training=True,
        )
        trial = DigitsTrial(context, samples=64)  # 4 batches per epoch
        with pytest.warns(FutureWarning, match="searcher.max_length"):
            pytorch.Trainer(trial, context).fit(
                validation_period=pytorch.Batch(4), checkpoint_policy="none"
            )
    assert [s for s, _ in recorder.validation] == [4, 8, 12]
    metrics = dict(recorder.validation)
    assert searcher.completed == [
        (2, metrics[8]["validation_loss"]),
        (3, metrics[12]["validation_loss"]),
    ]
    # A checkpoint at the end of each operation, so a promotion can resume from it.
    steps = [
        json.loads((_ckpt_dir(tmp_path, u) / "metadata.json").read_text())["steps_completed"]
        for u in trial.events.checkpoints
    ]
    assert steps == [8, 12]
    assert recorder.progress[-1] == pytest.approx(1.0)
