"""The training loop behind `Trainer.fit`: batches, boundaries, validation and checkpoints.

After every batch four boundaries are checked: TRAIN (max_length reached), VALIDATE, CHECKPOINT
and REPORT. When any is hit, the training metrics since the previous boundary are averaged across
ranks and reported; then the boundaries are acted on, and preemption / stop requests are checked.
"""

from __future__ import annotations

import enum
import inspect
import logging
import math
import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from determined.pytorch import _data, _state
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import Reducer, cross_slot_reduce, per_slot_reduce, to_number
from determined.pytorch._trial import PyTorchTrial, _overrides
from determined.pytorch._units import Epoch, TrainUnit

logger = logging.getLogger("determined.pytorch")

# The least time between two progress reports at report boundaries on the master (see _progress_due).
PROGRESS_INTERVAL_S = 1.0


class Boundary(enum.Enum):
    TRAIN = "train"
    VALIDATE = "validate"
    CHECKPOINT = "checkpoint"
    REPORT = "report"


class _PyTorchTrialController:
    """Runs one `PyTorchTrial` for one `Trainer.fit` call."""

    def __init__(
        self,
        trial: PyTorchTrial,
        context: PyTorchTrialContext,
        *,
        checkpoint_period: TrainUnit,
        validation_period: TrainUnit,
        reporting_period: TrainUnit,
        checkpoint_policy: str,
        latest_checkpoint: str | None,
        step_zero_validation: bool,
        test_mode: bool,
        searcher_metric_name: str | None,
        smaller_is_better: bool,
    ) -> None:
        self.trial = trial
        self.context = context
        self.core = context._core
        self.dist = context.distributed
        self.is_chief = self.dist.rank == 0
        self.on_cluster = context._managed_training
        self.checkpoint_period = checkpoint_period
        self.validation_period = validation_period
        self.reporting_period = reporting_period
        self.checkpoint_policy = checkpoint_policy
        self.latest_checkpoint = latest_checkpoint
        self.step_zero_validation = step_zero_validation
        self.test_mode = test_mode
        self.searcher_metric_name = searcher_metric_name
        self.smaller_is_better = smaller_is_better

        self.state = _state.TrialState(trial_id=context._trial_id)
        self.callbacks = trial.build_callbacks()
        self._train_iter: Iterator[Any] | None = None
        self._epoch_len = 0
        self._validation_loader: Any = None
        self._batches_this_fit = 0
        self._training_started = False
        self._last_progress_report = -float("inf")

    # --- setup ---------------------------------------------------------------------------
    def setup(self) -> None:
        """Build the data loaders, restore the checkpoint, position the training data."""
        train_loader = self.trial.build_training_data_loader()
        self._validation_loader = self.trial.build_validation_data_loader()
        if self.latest_checkpoint is not None:
            self._load(self.latest_checkpoint)
        self.context._steps_completed = self.state.batches_trained
        self._train_iter, self._epoch_len = self._training_batches(train_loader)
        self.context._epoch_len = self._epoch_len
        self.context._current_batch_idx = self.state.batches_trained
        for callback in self.callbacks.values():
            callback.on_trial_startup(self.state.batches_trained, self.latest_checkpoint)

    def _training_batches(self, loader: Any) -> tuple[Iterator[Any], int]:
        skip = self.state.batches_trained
        if isinstance(loader, _data.DataLoader):
            base = loader._base_batch_sampler()
            epoch_len = len(
                _data.adapt_batch_sampler(base, num_replicas=self.dist.size, rank=self.dist.rank)
            )
            torch_loader = loader.get_data_loader(
                repeat=True, skip=skip, num_replicas=self.dist.size, rank=self.dist.rank
            )
            iterator: Iterator[Any] = iter(torch_loader)
        elif isinstance(loader, torch.utils.data.DataLoader):
            if self.dist.size > 1:
                logger.warning(
                    "build_training_data_loader returned a torch DataLoader: Determined cannot shard it "
                    "across %d ranks (return det.pytorch.DataLoader to get sharding)",
                    self.dist.size,
                )
            epoch_len = _data.batches_per_epoch(loader)
            iterator = _data.repeat_and_skip(loader, skip)
        else:
            raise TypeError(
                "build_training_data_loader must return a det.pytorch.DataLoader (or a "
                f"torch.utils.data.DataLoader), got {type(loader).__name__}"
            )
        if epoch_len < 1:
            raise ValueError(
                "the training data loader has no batches for this rank: use a larger dataset or a "
                "smaller batch size"
            )
        return iterator, epoch_len

    # --- the loop ----------------------------------------------------------------------------
    def train_until(
        self, max_length: TrainUnit | None, progress_of: TrainUnit | None = None
    ) -> bool:
        """Train until `max_length` (None: only in test mode); False if stopped early (preempted)."""
        if (
            self.step_zero_validation
            and self.state.batches_trained == 0
            and self.state.last_val is None
        ):
            self._validate()
        if not self._training_started:
            self._training_started = True
            for callback in self.callbacks.values():
                callback.on_training_start()
        while not self._train_reached(max_length, epoch_end=True):
            hits, batch_metrics = self._train_with_boundaries(max_length)
            self._report_training_metrics(batch_metrics)
            if Boundary.TRAIN in hits or (Boundary.REPORT in hits and self._progress_due()):
                self._report_progress(progress_of or max_length)
            if Boundary.VALIDATE in hits and not self._validation_is_current():
                self._validate()
            if Boundary.CHECKPOINT in hits and not self._checkpoint_is_current():
                self._checkpoint()
            if self.on_cluster and self.is_chief:
                self.core.train.upload_tensorboard_files()
            if self._should_exit():
                return False
            if Boundary.TRAIN in hits:
                break
        return True

    def _train_reached(self, max_length: TrainUnit | None, epoch_end: bool) -> bool:
        if self.test_mode:
            return self._batches_this_fit >= 1
        assert max_length is not None and isinstance(max_length.value, int)  # checked by fit()
        if isinstance(max_length, Epoch):
            return epoch_end and self.state.batches_trained // self._epoch_len >= max_length.value
        return self.state.batches_trained >= max_length.value

    def _period_hit(self, period: TrainUnit, epoch_end: bool) -> bool:
        if isinstance(period, Epoch):
            return epoch_end and period.should_stop(self.state.batches_trained // self._epoch_len)
        return period.should_stop(self.state.batches_trained)

    def _train_with_boundaries(
        self, max_length: TrainUnit | None
    ) -> tuple[set[Boundary], list[dict[str, Any]]]:
        assert self._train_iter is not None
        for model in self.context.models:
            model.train()
        for reducer in self.context._reducers:
            if reducer.for_training:
                reducer.reducer.reset()
        batch_metrics: list[dict[str, Any]] = []
        next_check = self._next_possible_boundary(max_length)
        while True:
            batch_idx = self.state.batches_trained
            epoch_idx = batch_idx // self._epoch_len
            self.context._current_batch_idx = batch_idx
            if batch_idx % self._epoch_len == 0:
                for callback in self.callbacks.values():
                    callback.on_training_epoch_start(epoch_idx)
            batch = self.context.to_device(next(self._train_iter))
            metrics = self.trial.train_batch(batch, epoch_idx, batch_idx)
            batch_metrics.append(_training_metrics_dict(metrics))
            for wrapper in self.context.lr_schedulers:
                if (
                    wrapper.step_mode is LRScheduler.StepMode.STEP_EVERY_BATCH
                    and (batch_idx + 1) % wrapper.frequency == 0
                ):
                    wrapper.step()
            self.state.batches_trained += 1
            self._batches_this_fit += 1
            if self.state.batches_trained < next_check:
                continue  # no boundary can fall on this batch: skip the checks below
            next_check = self._next_possible_boundary(max_length)
            epoch_end = self.state.batches_trained % self._epoch_len == 0
            if epoch_end:
                self.state.epochs_trained = self.state.batches_trained // self._epoch_len
                for wrapper in self.context.lr_schedulers:
                    if (
                        wrapper.step_mode is LRScheduler.StepMode.STEP_EVERY_EPOCH
                        and self.state.epochs_trained % wrapper.frequency == 0
                    ):
                        wrapper.step()
                for callback in self.callbacks.values():
                    callback.on_training_epoch_end(epoch_idx)
            hits = set()
            if self._train_reached(max_length, epoch_end):
                hits.add(Boundary.TRAIN)
            for boundary, period in (
                (Boundary.VALIDATE, self.validation_period),
                (Boundary.CHECKPOINT, self.checkpoint_period),
                (Boundary.REPORT, self.reporting_period),
            ):
                if self._period_hit(period, epoch_end):
                    hits.add(boundary)
            if hits:
                self.context._current_batch_idx = self.state.batches_trained
                return hits, batch_metrics

    def _next_possible_boundary(self, max_length: TrainUnit | None) -> int:
        """The least batch count after the current one at which a boundary can be hit.

        Checking every period after every batch cost a few microseconds per batch, a measurable
        share of a small model's step (bench/bench_trial_throughput.py); between boundaries the
        loop now only counts. Epoch ends are always checked (epoch-based lengths and periods,
        epoch callbacks and schedulers act there); so is every batch in test mode and for a
        period given as a list of batch numbers.
        """
        done = self.state.batches_trained
        if self.test_mode:
            return done + 1
        candidates = [(done // self._epoch_len + 1) * self._epoch_len]
        if (
            max_length is not None
            and not isinstance(max_length, Epoch)
            and isinstance(max_length.value, int)
        ):
            candidates.append(max_length.value if max_length.value > done else done + 1)
        for period in (self.validation_period, self.checkpoint_period, self.reporting_period):
            if isinstance(period, Epoch):
                continue
            if isinstance(period.value, int) and period.value > 0:
                candidates.append((done // period.value + 1) * period.value)
            else:
                return done + 1
        return min(candidates)

    def _add_time_keys(self, metrics: dict[str, Any]) -> dict[str, Any]:
        # ASHA's time_metric reads these from validation metrics.
        metrics.setdefault("batches", self.state.batches_trained)
        metrics.setdefault(
            "epochs", self.state.batches_trained // self._epoch_len if self._epoch_len else 0
        )
        return metrics

    def _report_training_metrics(self, batch_metrics: list[dict[str, Any]]) -> None:
        batch_metrics = _metric_values(batch_metrics)
        mine = per_slot_reduce(batch_metrics, Reducer.AVG) if batch_metrics else {}
        custom = [r.reducer.per_slot_reduce() for r in self.context._reducers if r.for_training]
        everyone = self.dist.allgather((mine, len(batch_metrics), custom))
        metrics = cross_slot_reduce([e[0] for e in everyone], [e[1] for e in everyone], Reducer.AVG)
        metrics.update(self._cross_slot_custom([e[2] for e in everyone], for_training=True))
        metrics = self._add_time_keys(metrics)
        if self.is_chief:
            self.core.train.report_training_metrics(
                steps_completed=self.state.batches_trained, metrics=metrics
            )
        for callback in self.callbacks.values():
            callback.on_training_workload_end(metrics, batch_metrics)

    def _cross_slot_custom(self, per_rank: list[list[Any]], for_training: bool) -> dict[str, Any]:
        wrapped = [
            r
            for r in self.context._reducers
            if (r.for_training if for_training else r.for_validation)
        ]
        out: dict[str, Any] = {}
        for i, reducer in enumerate(wrapped):
            value = reducer.reducer.cross_slot_reduce([values[i] for values in per_rank])
            if reducer.name is not None:
                out[reducer.name] = to_number(value)
            elif isinstance(value, dict):
                out.update({k: to_number(v) for k, v in value.items()})
            else:
                raise ValueError(
                    f"{type(reducer.reducer).__name__}.cross_slot_reduce returned {type(value).__name__}: a "
                    "reducer wrapped without name= must return a dict of metrics"
                )
        return out

    def _progress_due(self) -> bool:
        """On the master a progress report is a POST of its own (the metrics shipper sends it at
        once), ~1-2 ms of the training thread's time: at report boundaries, once a second is
        plenty for a progress bar. Off the master every boundary reports (nothing is sent)."""
        if not self.on_cluster:
            return True
        now = time.monotonic()
        if now - self._last_progress_report < PROGRESS_INTERVAL_S:
            return False
        self._last_progress_report = now
        return True

    def _report_progress(self, length: TrainUnit | None) -> None:
        if (
            not self.is_chief
            or length is None
            or not isinstance(length.value, int)
            or length.value <= 0
        ):
            return
        if isinstance(length, Epoch):
            done = self.state.batches_trained / self._epoch_len
        else:
            done = self.state.batches_trained
        self.core.train.report_progress(min(1.0, max(0.0, done / length.value)))

    def _should_exit(self) -> bool:
        stop_requested = any(self.dist.allgather(self.context.get_stop_requested()))
        preempted = self.core.preempt.should_preempt()
        if not (stop_requested or preempted):
            return False
        logger.info(
            "%s: stopping training at batch %d",
            "preempted" if preempted else "stop requested",
            self.state.batches_trained,
        )
        if not self._checkpoint_is_current():
            self._checkpoint()
        if stop_requested and not preempted and self.on_cluster and self.is_chief:
            from determined.core import EarlyExitReason

            self.core.train.report_early_exit(EarlyExitReason.USER_REQUESTED_STOP)
        return True

    def finish(self) -> None:
        """End of training: validate and checkpoint unless already current."""
        if not self._validation_is_current():
            self._validate()
        if not self._checkpoint_is_current():
            self._checkpoint()

    def shutdown(self) -> None:
        for callback in self.callbacks.values():
            callback.on_trial_shutdown()

    # --- validation ---------------------------------------------------------------------------
    def _validation_is_current(self) -> bool:
        return self.state.last_val == self.state.batches_trained

    def _checkpoint_is_current(self) -> bool:
        return self.state.last_ckpt == self.state.batches_trained

    def last_validation_metrics(self) -> dict[str, Any] | None:
        if self._validation_is_current():
            return self.state.last_validation_metrics
        return None

    def _validate(self) -> dict[str, Any]:
        for model in self.context.models:
            model.eval()
        for callback in self.callbacks.values():
            callback.on_validation_start()
        with torch.no_grad():
            if _overrides(self.trial, "evaluate_batch"):
                metrics = self._evaluate_batches()
            elif _overrides(self.trial, "evaluate_full_dataset"):
                metrics = self._evaluate_full_dataset()
            else:
                raise NotImplementedError(
                    f"{type(self.trial).__name__} must implement evaluate_batch(batch, batch_idx) or "
                    "evaluate_full_dataset(data_loader)"
                )
        for model in self.context.models:
            model.train()
        metrics = self._add_time_keys({k: to_number(v) for k, v in metrics.items()})

        best_before = None
        if self.is_chief:
            if self.checkpoint_policy == "best":
                # Asked before reporting: the master must not count this validation yet.
                best_before = self.core.train.get_experiment_best_validation()
            self.core.train.report_validation_metrics(
                steps_completed=self.state.batches_trained, metrics=metrics
            )
        self.state.last_val = self.state.batches_trained
        self.state.last_validation_metrics = metrics
        for callback in self.callbacks.values():
            callback.on_validation_end(metrics)

        should_checkpoint = False
        if self.is_chief and not self.test_mode:
            name = self.searcher_metric_name
            if name is not None and name not in metrics:
                raise RuntimeError(
                    f"the searcher metric {name!r} (searcher.metric) is not among the validation metrics "
                    f"{sorted(metrics)}: return it from evaluate_batch / evaluate_full_dataset"
                )
            if self.checkpoint_policy == "all":
                should_checkpoint = True
            elif self.checkpoint_policy == "best" and name is not None:
                should_checkpoint = _is_better(metrics[name], best_before, self.smaller_is_better)
        if self.dist.broadcast(should_checkpoint) and not self._checkpoint_is_current():
            self._checkpoint()
        return metrics

    def _validation_torch_loader(self, shard: bool) -> Any:
        loader = self._validation_loader
        if isinstance(loader, _data.DataLoader):
            if shard:
                return loader.get_data_loader(
                    repeat=False, num_replicas=self.dist.size, rank=self.dist.rank
                )
            return loader.get_data_loader(repeat=False)
        if isinstance(loader, torch.utils.data.DataLoader):
            return loader
        raise TypeError(
            "build_validation_data_loader must return a det.pytorch.DataLoader (or a "
            f"torch.utils.data.DataLoader), got {type(loader).__name__}"
        )

    def _evaluate_batches(self) -> dict[str, Any]:
        for reducer in self.context._reducers:
            if reducer.for_validation:
                reducer.reducer.reset()
        for callback in self.callbacks.values():
            callback.on_validation_epoch_start()
        takes_batch_idx = len(inspect.signature(self.trial.evaluate_batch).parameters) >= 2
        outputs: list[dict[str, Any]] = []
        for idx, batch in enumerate(self._validation_torch_loader(shard=True)):
            batch = self.context.to_device(batch)
            result = (
                self.trial.evaluate_batch(batch, idx)
                if takes_batch_idx
                # Older trials define evaluate_batch(self, batch).
                else self.trial.evaluate_batch(batch)  # type: ignore[call-arg]
            )
            if not isinstance(result, dict):
                raise TypeError(
                    f"evaluate_batch must return a dict of metrics, got {type(result).__name__}"
                )
            outputs.append(result)
        for callback in self.callbacks.values():
            callback.on_validation_epoch_end(outputs)
        reducers = self.trial.evaluation_reducer()
        mine = per_slot_reduce(outputs, reducers) if outputs else {}
        custom = [r.reducer.per_slot_reduce() for r in self.context._reducers if r.for_validation]
        everyone = self.dist.allgather((mine, len(outputs), custom))
        metrics = cross_slot_reduce([e[0] for e in everyone], [e[1] for e in everyone], reducers)
        metrics.update(self._cross_slot_custom([e[2] for e in everyone], for_training=False))
        return metrics

    def _evaluate_full_dataset(self) -> dict[str, Any]:
        metrics = None
        if self.is_chief:
            metrics = self.trial.evaluate_full_dataset(self._validation_torch_loader(shard=False))
            if not isinstance(metrics, dict):
                raise TypeError(
                    f"evaluate_full_dataset must return a dict of metrics, got {type(metrics).__name__}"
                )
            metrics = {k: to_number(v) for k, v in metrics.items()}
        return self.dist.broadcast(metrics)

    # --- checkpoints ---------------------------------------------------------------------------
    def _checkpoint(self) -> str:
        metadata = _state.checkpoint_metadata(self.state.batches_trained)
        self.state.last_ckpt = self.state.batches_trained
        with self.core.checkpoint.store_path(metadata, shard=True) as (path, storage_id):
            state = _state.build_state_dict(self.context, self.callbacks)
            for callback in self.callbacks.values():
                callback.on_checkpoint_save_start(state)
            if self.is_chief:
                _state.write_checkpoint_files(path, state, self.state, self._load_data())
            for callback in self.callbacks.values():
                callback.on_checkpoint_write_end(str(path))
                if type(callback).on_checkpoint_end is not PyTorchCallback.on_checkpoint_end:
                    warnings.warn(
                        "PyTorchCallback.on_checkpoint_end is deprecated: use on_checkpoint_write_end",
                        FutureWarning,
                        stacklevel=2,
                    )
                    callback.on_checkpoint_end(str(path))
        for callback in self.callbacks.values():
            callback.on_checkpoint_upload_end(storage_id)
        self.latest_checkpoint = storage_id
        logger.info("checkpoint %s at batch %d", storage_id, self.state.batches_trained)
        return storage_id

    def _load_data(self) -> dict[str, Any]:
        return {
            "trial_type": "PyTorchTrial",
            "experiment_config": self.context._exp_conf or {},
            "hparams": self.context._hparams or {},
            "trial_cls_spec": _state.trial_class_spec(self.trial),
            "is_trainer": True,
        }

    def _load(self, storage_id: str) -> None:
        with self.core.checkpoint.restore_path(storage_id) as path:
            state = _state.read_state_dict(path, map_location=self.context.device)
            trial_state = _state.read_trial_state(path)
        for callback in self.callbacks.values():
            callback.on_checkpoint_load_start(state)
        _state.load_state_dict(state, self.context, self.callbacks)
        if trial_state is not None and trial_state.trial_id == self.state.trial_id:
            self.state = trial_state
        else:
            # A checkpoint of another trial (warm start): keep its weights, start counting at 0.
            logger.info("warm-starting from checkpoint %s of another trial", storage_id)
        logger.info(
            "resumed from checkpoint %s at batch %d", storage_id, self.state.batches_trained
        )


def _training_metrics_dict(metrics: Any) -> dict[str, Any]:
    """One batch's metrics, tensors kept (detached) on their device: reading a tensor's value
    waits for the device, so that happens once per report (`_metric_values`), not per batch."""
    if isinstance(metrics, torch.Tensor):
        return {"loss": metrics.detach()}
    if not isinstance(metrics, dict):
        raise TypeError(
            f"train_batch must return a dict of metrics (or the loss tensor), got {type(metrics).__name__}"
        )
    return {
        k: v.detach() if isinstance(v, torch.Tensor) else to_number(v) for k, v in metrics.items()
    }


def _metric_values(batch_metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`batch_metrics` with every tensor replaced by its value (numbers, lists for non-scalars).

    A metric whose values are scalar tensors of one dtype and device is read with one
    `torch.stack(...).tolist()`, so the device is waited for once per metric, not per batch.
    This runs at every report (100 batches by default): per-tensor checks here cost ~2 µs a
    batch, a measurable share of a small model's step, so the checks are the cheap ones
    (`dtype`, `dim`) and a device mismatch is left to `torch.stack` to find.
    """
    if not any(isinstance(v, torch.Tensor) for m in batch_metrics for v in m.values()):
        return batch_metrics
    keys: list[str] = []
    for metrics in batch_metrics:
        keys.extend(k for k in metrics if k not in keys)
    read: dict[str, list[Any]] = {}
    for key in keys:
        values = [m[key] for m in batch_metrics if key in m]
        scalars = _scalar_tensor_values(values)
        read[key] = scalars if scalars is not None else [to_number(v) for v in values]
    if len(keys) == 1 and len(read[keys[0]]) == len(batch_metrics):  # the usual case: one metric
        key = keys[0]
        return [{key: value} for value in read[key]]
    positions = {key: iter(values) for key, values in read.items()}
    return [{k: next(positions[k]) for k in metrics} for metrics in batch_metrics]


def _scalar_tensor_values(values: list[Any]) -> list[Any] | None:
    """The values of `values` read at once when they are one-element tensors of one dtype on
    one device; None otherwise."""
    first = values[0] if values else None
    if not isinstance(first, torch.Tensor):
        return None
    dtype = first.dtype
    for value in values:
        if not isinstance(value, torch.Tensor) or value.dtype is not dtype or value.dim() > 1:
            return None
    try:
        stacked = torch.stack(values) if first.dim() == 0 else torch.cat(values)
    except RuntimeError:  # different devices (or shapes): read one by one
        return None
    if stacked.dim() != 1 or stacked.shape[0] != len(values):
        return None  # some of the 1-d tensors held more than one element
    return stacked.cpu().tolist()


def _is_better(value: Any, best: float | None, smaller_is_better: bool) -> bool:
    value = float(value)
    if math.isnan(value):
        return False
    if best is None:
        return True
    return value < best if smaller_is_better else value > best
