"""PyTorch's adapter of the managed training loop (`determined._loop`): `Trainer.fit` runs it.

The core decides the chunks (from the periods, converted to batches), validation, checkpoints,
preemption, stop requests and reports. This adapter trains batches (`train_batch`, epoch
callbacks, LR schedulers), averages the training metrics across ranks at each chunk end,
validates (`evaluate_batch` / `evaluate_full_dataset`, reducers), and saves and restores the
trial's state dicts.
"""

from __future__ import annotations

import logging
import pathlib
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from determined import _loop as loop_core
from determined.pytorch import _data, _state
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import Reducer, cross_slot_reduce, per_slot_reduce
from determined.pytorch._trial import PyTorchTrial
from determined.pytorch._trial_metrics import (
    cross_slot_custom,
    metric_values,
    training_metrics_dict,
)
from determined.pytorch._units import Epoch, TrainUnit
from determined.pytorch._validation import PyTorchValidation

logger = logging.getLogger("determined.pytorch")

# The least time between two progress reports at report boundaries on the master (see _progress_due).
PROGRESS_INTERVAL_S = 1.0
# "Never checkpointed" in the loop's bookkeeping (a warm start from another trial's checkpoint).
_NEVER = -1


def _period(unit: TrainUnit, epoch_len: int) -> loop_core.Period:
    """A `Batch`/`Epoch` period in batches: ints are multiples, containers exact counts."""
    if isinstance(unit.value, int):
        if isinstance(unit, Epoch):
            # Epoch(n <= 0) is every epoch end.
            return loop_core.Every(max(unit.value, 1) * epoch_len)
        return loop_core.Every(unit.value)
    return loop_core.At(unit.value, epoch_len if isinstance(unit, Epoch) else 0)


class _PyTorchTrialController(PyTorchValidation, loop_core.TrainingLoop):
    """Runs one `PyTorchTrial` for one `Trainer.fit` call."""

    _log = logger
    searcher_metric_hint = "return it from evaluate_batch / evaluate_full_dataset"
    stop_completes_operation = False
    checkpoint_each_operation = True
    checkpoint_shard = True

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
        progress_of: TrainUnit | None = None,
    ) -> None:
        config = context.get_experiment_config()
        gbs = (context._hparams or {}).get("global_batch_size")
        super().__init__(
            context._core,
            config=config,
            lengths=loop_core.Lengths(config, gbs if isinstance(gbs, int) else 0),
            mode=loop_core.LoopMode.CLUSTER
            if context._managed_training
            else loop_core.LoopMode.LOCAL,
            # The periods count epochs of the data loader: planned once it is built (_before_run).
            plan=loop_core.ChunkPlan(report=loop_core.Every(1)),
            latest_checkpoint=latest_checkpoint,
            stop_requested=context.get_stop_requested,
            checkpoint_policy=checkpoint_policy,
        )
        self.trial = trial
        self.context = context
        self.dist = context.distributed
        self.is_chief = self.dist.rank == 0
        self.periods = (reporting_period, validation_period, checkpoint_period)
        self.step_zero_validation = step_zero_validation
        self.test_mode = test_mode
        self.progress_of = progress_of
        self.trial_id = context._trial_id
        self.callbacks = trial.build_callbacks()
        context._callbacks = self.callbacks
        self._train_loader: Any = None
        self._train_iter: Iterator[Any] | None = None
        self._epoch_len = 0
        self._validation_loader: Any = None
        self._restored_state: _state.TrialState | None = None
        self._last_progress_report = -float("inf")

    # --- setup ---------------------------------------------------------------------------------
    def _before_run(self) -> None:
        """Build the data loaders; the periods and lengths in epochs follow from them.

        The epoch length is the chief's: when the batches do not split evenly across ranks, a
        rank's own shard may hold one batch fewer than the chief's, and ranks that disagree on
        where an epoch ends stop at different batches (one in a gradient allreduce, the other in a
        metrics allgather) and hang. Determined broadcasts the chief's length the same way.
        """
        self._train_loader = self.trial.build_training_data_loader()
        self._validation_loader = self.trial.build_validation_data_loader()
        self._epoch_len = self._agreed_epoch_len(self._batches_per_epoch(self._train_loader))
        self.context._epoch_len = self._epoch_len
        self.lengths.batches_per_epoch = self._epoch_len
        report, validation, checkpoint = (_period(p, self._epoch_len) for p in self.periods)
        self.plan = loop_core.ChunkPlan(report=report, validation=validation, checkpoint=checkpoint)

    def _start(self) -> None:
        """Position the training data after the restored batches; startup callbacks."""
        self.context._steps_completed = self.steps
        self.context._current_batch_idx = self.steps
        self._train_iter = self._training_batches(self._train_loader)
        for callback in self.callbacks.values():
            callback.on_trial_startup(self.steps, self.latest_checkpoint)
        if self.step_zero_validation and self.steps == 0 and self.last_validation_metrics is None:
            self._validate()
        for callback in self.callbacks.values():
            callback.on_training_start()

    def _agreed_epoch_len(self, mine: int) -> int:
        """The chief's epoch length, on every rank (`mine` on a single rank)."""
        chiefs = mine if self.dist.size <= 1 else int(self.dist.broadcast(mine))
        if chiefs < 1:  # every rank raises: the chief's length is everyone's
            raise ValueError(
                "the training data loader has no batches: use a larger dataset or a smaller batch "
                "size"
            )
        if chiefs != mine:
            logger.info(
                "rank %d: its shard has %d batches an epoch, the chief's %d; counting epochs as "
                "the chief does (the training data repeats, so the rank reads on)",
                self.dist.rank,
                mine,
                chiefs,
            )
        return chiefs

    def _batches_per_epoch(self, loader: Any) -> int:
        if isinstance(loader, _data.DataLoader):
            base = loader._base_batch_sampler()
            epoch_len = len(
                _data.adapt_batch_sampler(base, num_replicas=self.dist.size, rank=self.dist.rank)
            )
        elif isinstance(loader, torch.utils.data.DataLoader):
            epoch_len = _data.batches_per_epoch(loader)
        else:
            raise TypeError(
                "build_training_data_loader must return a det.pytorch.DataLoader (or a "
                f"torch.utils.data.DataLoader), got {type(loader).__name__}"
            )
        return epoch_len

    def _training_batches(self, loader: Any) -> Iterator[Any]:
        skip = self.steps
        if isinstance(loader, _data.DataLoader):
            torch_loader = loader.get_data_loader(
                repeat=True, skip=skip, num_replicas=self.dist.size, rank=self.dist.rank
            )
            return iter(torch_loader)
        if self.dist.size > 1 and not self.context.experimental._data_repro_checks_disabled:
            logger.warning(
                "build_training_data_loader returned a torch DataLoader: Determined cannot shard it "
                "across %d ranks (return det.pytorch.DataLoader to get sharding)",
                self.dist.size,
            )
        return _data.repeat_and_skip(loader, skip)

    # --- what to train to ------------------------------------------------------------------------
    def local_operations(self, max_length: TrainUnit | None) -> Iterable[loop_core.LocalOperation]:
        """`Trainer.fit(max_length=...)` as one operation (1 batch in test mode); lazy, because
        epochs and the restored batch count are known only once `run()` has started."""
        if self.test_mode:
            yield loop_core.LocalOperation(self.steps + 1)
            return
        assert max_length is not None and isinstance(max_length.value, int)  # checked by fit()
        yield loop_core.LocalOperation(self._batches(max_length))

    def _batches(self, length: TrainUnit) -> int:
        assert isinstance(length.value, int)
        return length.value * self._epoch_len if isinstance(length, Epoch) else length.value

    # --- training ---------------------------------------------------------------------------------
    def _train_batches(self, start: int, end: int) -> tuple[int, dict]:
        assert self._train_iter is not None
        for model in self.context.models:
            model.train()
        for reducer in self.context._reducers:
            if reducer.for_training:
                reducer.reducer.reset()
        batch_metrics: list[dict[str, Any]] = []
        epoch_len = self._epoch_len
        for batch_idx in range(start, end):
            epoch_idx = batch_idx // epoch_len
            self.context._current_batch_idx = batch_idx
            if batch_idx % epoch_len == 0:
                for callback in self.callbacks.values():
                    callback.on_training_epoch_start(epoch_idx)
            batch = next(self._train_iter)
            if self.context.experimental._auto_to_device:
                batch = self.context.to_device(batch)
            metrics = self.trial.train_batch(batch, epoch_idx, batch_idx)
            batch_metrics.append(training_metrics_dict(metrics))
            for wrapper in self.context.lr_schedulers:
                if (
                    wrapper.step_mode is LRScheduler.StepMode.STEP_EVERY_BATCH
                    and (batch_idx + 1) % wrapper.frequency == 0
                ):
                    wrapper.step()
            self.steps = batch_idx + 1
            if self.steps % epoch_len == 0:
                epochs_trained = self.steps // epoch_len
                for wrapper in self.context.lr_schedulers:
                    if (
                        wrapper.step_mode is LRScheduler.StepMode.STEP_EVERY_EPOCH
                        and epochs_trained % wrapper.frequency == 0
                    ):
                        wrapper.step()
                for callback in self.callbacks.values():
                    callback.on_training_epoch_end(epoch_idx)
        self.context._current_batch_idx = self.steps
        return self.steps, self._training_metrics(batch_metrics)

    def _add_time_keys(self, metrics: dict[str, Any]) -> dict[str, Any]:
        # ASHA's time_metric reads these from validation metrics.
        metrics.setdefault("batches", self.steps)
        metrics.setdefault("epochs", self.steps // self._epoch_len if self._epoch_len else 0)
        return metrics

    def _training_metrics(self, batch_metrics: list[dict[str, Any]]) -> dict[str, Any]:
        """The chunk's training metrics averaged over its batches and all ranks."""
        batch_metrics = metric_values(batch_metrics)
        mine = per_slot_reduce(batch_metrics, Reducer.AVG) if batch_metrics else {}
        custom = [r.reducer.per_slot_reduce() for r in self.context._reducers if r.for_training]
        everyone = self.dist.allgather((mine, len(batch_metrics), custom))
        metrics = cross_slot_reduce([e[0] for e in everyone], [e[1] for e in everyone], Reducer.AVG)
        metrics.update(
            cross_slot_custom(self.context._reducers, [e[2] for e in everyone], for_training=True)
        )
        metrics = self._add_time_keys(metrics)
        for callback in self.callbacks.values():
            callback.on_training_workload_end(metrics, batch_metrics)
        return metrics

    # --- the core loop's hooks ------------------------------------------------------------------
    def _after_chunk(self) -> None:
        if self.mode is loop_core.LoopMode.CLUSTER and self.is_chief:
            self.core.train.upload_tensorboard_files()

    def _stop_requested(self) -> bool:
        return any(self.dist.allgather(self.context.get_stop_requested()))

    def _agree(self, decision: bool) -> bool:
        return bool(self.dist.broadcast(decision))

    def _progress_due(self) -> bool:
        """On the master a progress report is a POST of its own (the metrics shipper sends it at
        once), ~1-2 ms of the training thread's time: at report boundaries, once a second is
        plenty for a progress bar. Off the master every boundary reports (nothing is sent)."""
        if self.mode is not loop_core.LoopMode.CLUSTER:
            return True
        now = time.monotonic()
        if now - self._last_progress_report < PROGRESS_INTERVAL_S:
            return False
        self._last_progress_report = now
        return True

    def _report_progress(self, op: Any, target: int, *, done: bool = False) -> None:
        # The fraction of the whole length (the searcher's, or fit's max_length), reported when
        # an operation's target is reached and, throttled, at report boundaries.
        if done or not self.is_chief:
            return
        if not (
            self.steps >= target
            or (self.plan.report.due(self.steps, self.steps) and self._progress_due())
        ):
            return
        whole = self._batches(self.progress_of) if self.progress_of is not None else target
        if whole <= 0:
            return
        self.core.train.report_progress(min(1.0, max(0.0, self.steps / whole)))

    def searcher_value(self, metrics: dict) -> float:
        if self.test_mode and self.searcher_metric not in metrics:
            return float("nan")  # test mode checks that the trial runs, not the searcher's metric
        return super().searcher_value(metrics)

    # --- checkpoints ---------------------------------------------------------------------------
    def _checkpoint_metadata(self) -> dict:
        metadata = _state.checkpoint_metadata(self.steps)
        del metadata["steps_completed"]  # the core's
        return metadata

    def _loop_metadata(self) -> dict:
        return {}  # where the loop stood is in trial_state.pkl

    def _trial_state(self) -> _state.TrialState:
        validated = self.last_validation_metrics is not None
        return _state.TrialState(
            trial_id=self.trial_id,
            batches_trained=self.steps,
            epochs_trained=self.steps // self._epoch_len if self._epoch_len else 0,
            last_ckpt=self.steps,
            last_val=self.last_validation if validated else None,
            last_validation_metrics=self.last_validation_metrics,
        )

    def _save(self, path: pathlib.Path) -> None:
        state = _state.build_state_dict(self.context, self.callbacks)
        for callback in self.callbacks.values():
            callback.on_checkpoint_save_start(state)
        if self.is_chief:
            _state.write_checkpoint_files(path, state, self._trial_state(), self._load_data())
        for callback in self.callbacks.values():
            callback.on_checkpoint_write_end(str(path))
            if type(callback).on_checkpoint_end is not PyTorchCallback.on_checkpoint_end:
                warnings.warn(
                    "PyTorchCallback.on_checkpoint_end is deprecated: use on_checkpoint_write_end",
                    FutureWarning,
                    stacklevel=2,
                )
                callback.on_checkpoint_end(str(path))

    def _saved(self, storage_id: str) -> None:
        for callback in self.callbacks.values():
            callback.on_checkpoint_upload_end(storage_id)
        self.latest_checkpoint = storage_id

    def _load_data(self) -> dict[str, Any]:
        return {
            "trial_type": "PyTorchTrial",
            "experiment_config": self.context._exp_conf or {},
            "hparams": self.context._hparams or {},
            "trial_cls_spec": _state.trial_class_spec(self.trial),
            "is_trainer": True,
        }

    def _load(self, path: pathlib.Path, metadata: dict, storage_id: str) -> int:
        state = _state.read_state_dict(path, map_location=self.context.device)
        trial_state = _state.read_trial_state(path)
        for callback in self.callbacks.values():
            callback.on_checkpoint_load_start(state)
        _state.load_state_dict(state, self.context, self.callbacks)
        self._restored_state = trial_state
        if trial_state is None or trial_state.trial_id != self.trial_id:
            # A checkpoint of another trial (a warm start): keep its weights, start counting at 0.
            logger.info("warm-starting from checkpoint %s of another trial", storage_id)
            self._restored_state = None
            return 0
        return trial_state.batches_trained

    def _restore_bookkeeping(self, metadata: dict) -> None:
        trial_state = self._restored_state
        if trial_state is None:
            self.last_validation, self.last_checkpoint = 0, _NEVER
            return
        self.last_checkpoint = _NEVER if trial_state.last_ckpt is None else trial_state.last_ckpt
        self.last_validation = trial_state.last_val or 0
        if trial_state.last_val is not None:
            self.last_validation_metrics = trial_state.last_validation_metrics

    def shutdown(self) -> None:
        """End of `fit`: the callbacks' `on_trial_shutdown`."""
        for callback in self.callbacks.values():
            callback.on_trial_shutdown()
