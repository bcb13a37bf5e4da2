"""Keras' adapter of the managed training loop (`determined._loop`).

The core decides lengths, chunks, validation/checkpoint periods, preemption and reports; Keras'
own `fit` trains, `evaluate` validates, and a checkpoint is the model in Keras' format. Chunk
boundaries depend only on the step count, so a resumed trial cuts its chunks where an
uninterrupted one does, and (with data that is a function of the batch index, see `_data`)
trains on the same batches with the same optimizer state.

Each chunk is one Keras epoch, and the work between chunks (metrics, validation, checkpoints,
preemption) runs in `_ChunkDriver.on_epoch_end`. Consecutive chunks of the same length share
one `fit` call (`steps_per_epoch` = the chunk length) as far as a memory budget for their
training data allows: a `fit` call costs ~0.1 s of set-up (data adapter, tf.data pipeline,
iterator), as much as ~100 training steps of a small model, so one call per chunk would
double the time of such a model. Sharing needs the chunk length to be a multiple of the
model's `steps_per_execution` (Keras runs whole executions); otherwise each chunk gets its own
`fit` call, as before.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pathlib
import types
from collections.abc import Callable
from typing import Any

import keras

from determined import _loop as loop_core
from determined._loop import Every, LoopMode, Report
from determined.keras import _data, _flavor, _tensorboard
from determined.keras._callback import numeric_logs
from determined.keras._context import FitArguments, check_compiled, original_fit

logger = logging.getLogger("determined.keras")

MODEL_FILE = "model.keras"
TF_KERAS_WEIGHTS = "determined-keras-model-weights"  # tf_keras models: TensorFlow checkpoint

# The most training data (bytes) one `fit` call may be handed when chunks share it: the arrays
# are gathered (copied) for the call, and tf.data copies them once more.
FIT_DATA_BUDGET_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass
class TrainingSpec:
    """What Keras trains: the compiled model, its data, and the user's callbacks."""

    model: Any
    train: _data.BatchSource
    validation: dict  # evaluate() keyword arguments
    callbacks: list
    class_weight: Any = None


@dataclasses.dataclass
class LoopResult(loop_core.LoopResult):
    """The core's result, which Keras also shows as a `History` (what `fit` returns)."""

    def history(self) -> keras.callbacks.History:
        """The reports as a Keras History (`history.history[name]` lists, in report order).

        Returns:
            A `keras.callbacks.History` with one entry per reported metric.
        """
        history = keras.callbacks.History()
        history.history = {}
        for report in self.reports:
            for name, value in report.metrics.items():
                history.history.setdefault(name, []).append(value)
        history.epoch = sorted({r.steps_completed for r in self.reports})
        return history


class ChunkedCallbacksMixin:
    """Shows the user's callbacks one training run although `fit` is called once per chunk.

    `on_train_begin` reaches them once (so e.g. EarlyStopping keeps its patience across chunks),
    `on_train_end` once at the very end, and each chunk's `on_epoch_end` is held back until the
    loop has validated, so its logs carry the `val_*` metrics when a validation happened there.
    Callbacks with Determined's hooks (`det.keras.callbacks.Callback`) also get
    `on_train_workload_begin/end` around each chunk and `on_checkpoint_end` after each checkpoint.

    Made into a callback of the model's Keras by `chunked_callbacks()`.
    """

    model: Any

    def __init__(self, callbacks: list, keras_module: types.ModuleType = keras) -> None:
        super().__init__()
        self.callbacks_given = list(callbacks)
        self.inner = keras_module.callbacks.CallbackList(list(callbacks))
        self._chunk_start = 0
        self._began = False
        self._pending_epoch_end: tuple[int, dict] | None = None
        # Keras runs batch-end hooks off the training thread ("async") only when every callback
        # allows it; this wrapper overrides them, so it must say whether the wrapped ones allow it
        # (else every batch would convert its logs to Python numbers on the training thread).
        self.async_safe = all(
            getattr(cb, "async_safe", False)
            or (
                getattr(cb.on_train_batch_end, "_is_default", False)
                and getattr(cb.on_batch_end, "_is_default", False)
            )
            for cb in callbacks
        )

    def set_model(self, model: Any) -> None:
        super().set_model(model)  # type: ignore[misc]
        self.inner.set_model(model)

    def set_params(self, params: Any) -> None:
        super().set_params(params)  # type: ignore[misc]
        self.inner.set_params(params)

    def _each_with(self, hook: str) -> list:
        return [getattr(cb, hook) for cb in self.callbacks_given if hasattr(cb, hook)]

    def on_train_begin(self, logs: Any = None) -> None:
        if not self._began:
            self._began = True
            self.inner.on_train_begin(logs)

    def on_train_end(self, logs: Any = None) -> None:
        pass  # see finish()

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.inner.on_epoch_begin(epoch, logs)
        hooks = self._each_with("on_train_workload_begin")
        if hooks:
            self._chunk_start = int(self.model.optimizer.iterations.numpy())
            for hook in hooks:
                hook(self._chunk_start, None, {})

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._pending_epoch_end = (epoch, dict(logs or {}))

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.inner.on_train_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.inner.on_train_batch_end(batch, logs)

    def deliver_epoch_end(self, validation_metrics: dict | None) -> None:
        if self._pending_epoch_end is not None:
            epoch, logs = self._pending_epoch_end
            self._pending_epoch_end = None
            self.inner.on_epoch_end(epoch, {**logs, **(validation_metrics or {})})
            for hook in self._each_with("on_train_workload_end"):
                hook(int(self.model.optimizer.iterations.numpy()), logs)

    def checkpoint_end(self, checkpoint_dir: str) -> None:
        for hook in self._each_with("on_checkpoint_end"):
            hook(checkpoint_dir)

    def finish(self, logs: dict | None) -> None:
        if self._began:
            self.inner.on_train_end(logs)


def chunked_callbacks(callbacks: list, keras_module: types.ModuleType) -> Any:
    """A `ChunkedCallbacksMixin` callback of `keras_module` (`keras` or `tf_keras`)."""
    return _flavor.specialise(ChunkedCallbacksMixin, keras_module)(callbacks, keras_module)


# Why a `fit` call ended before its last epoch (chunk) for a reason of the adapter's own: the
# next chunk is not the length the call was set up for.
_REPLAN = "replan"


class _ChunkDriverMixin:
    """Ends each chunk (Keras epoch) inside `fit`: the core loop's `_end_chunk` runs here.

    Made into a callback of the model's Keras by `_flavor.specialise`."""

    def __init__(self, loop: ManagedLoop, op: Any, target: int, length: int, chunks: int) -> None:
        super().__init__()
        self.loop, self.op, self.target = loop, op, target
        self.length, self.chunks_left = length, chunks
        self.outcome: loop_core.ChunkEnd | str | None = None

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self.chunks_left -= 1
        loop = self.loop
        end = loop.steps + self.length
        if getattr(loop.model, "stop_training", False):
            trained = int(loop.model.optimizer.iterations.numpy())
            if loop.steps <= trained < end:
                end = trained  # a callback stopped training inside the chunk
        loop._epoch += 1
        outcome: loop_core.ChunkEnd | str | None = loop._end_chunk(
            self.op, self.target, end, numeric_logs(logs)
        )
        if (
            outcome is None
            and self.chunks_left > 0
            and loop.chunk_end(self.target) != loop.steps + self.length
        ):
            outcome = _REPLAN
        if outcome is not None:
            self.outcome = outcome
            loop.model.stop_training = True


def spec_from_fit(
    model: Any, fit: FitArguments, *, batch_size: int, seed: int, fit_config: dict
) -> TrainingSpec:
    check_compiled(model)
    shuffle = fit_config.get("shuffle", fit.shuffle)
    return TrainingSpec(
        model=model,
        train=_data.training_source(
            fit.x,
            fit.y,
            fit.sample_weight,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            keras_module=_flavor.module_of(model) or keras,
        ),
        validation=_data.validation_kwargs(fit.validation_data, batch_size=batch_size),
        callbacks=list(fit.callbacks),
        class_weight=fit_config.get("class_weight", fit.class_weight),
    )


class ManagedLoop(loop_core.TrainingLoop):
    """The Keras adapter of the core loop: Keras' own `fit` trains, `evaluate` validates, and a
    checkpoint is the model saved in Keras' format.

    Args:
        core_context: the Core API context.
        spec: the model, its data and callbacks.
        config: the (expanded) experiment config.
        global_batch_size: records per batch, summed over all ranks.
        mode: CLUSTER, LOCAL or TEST.
        latest_checkpoint: a checkpoint to resume from.
        stop_requested: polled after every chunk (besides `model.stop_training`).
        on_report: called with every report.
    """

    result_type = LoopResult
    _log = logger
    default_searcher_metric = "val_loss"
    searcher_metric_forms = ("{}", "val_{}")
    searcher_metric_hint = "validation metrics are Keras' metric names prefixed with 'val_'"

    def __init__(
        self,
        core_context: Any,
        spec: TrainingSpec,
        *,
        config: dict,
        global_batch_size: int,
        mode: LoopMode,
        latest_checkpoint: str | None = None,
        stop_requested: Callable[[], bool] = lambda: False,
        on_report: Callable[[Report], None] | None = None,
    ) -> None:
        lengths = loop_core.Lengths(
            config,
            global_batch_size,
            records_per_epoch=spec.train.records,
            epoch_hint=" (or train on arrays, whose length is known)",
        )
        super().__init__(
            core_context,
            config=config,
            lengths=lengths,
            mode=mode,
            latest_checkpoint=latest_checkpoint,
            stop_requested=stop_requested,
            on_report=on_report,
        )
        self.spec = spec
        self.model = spec.model
        # Where det.keras.callbacks.TensorBoard writes (the Core API uploads that directory).
        train = getattr(core_context, "train", None)
        _tensorboard.set_active_path(train.get_tensorboard_path() if train is not None else None)
        self.keras_module = _flavor.module_of(spec.model) or keras
        self._epoch = 0  # Keras epochs (chunks) so far, so callbacks see one numbering
        self.callbacks = (
            chunked_callbacks(spec.callbacks, self.keras_module) if spec.callbacks else None
        )
        self._warned_execution = False

    # --- the core loop's hooks ------------------------------------------------------------------
    def _before_run(self) -> None:
        check_compiled(self.model)

    def _finish(self) -> loop_core.LoopResult:
        if self.callbacks is not None:
            self.callbacks.finish(self.last_validation_metrics)
        return super()._finish()

    def _stop_requested(self) -> bool:
        return bool(getattr(self.model, "stop_training", False) or self.stop_requested())

    def _validated(self, metrics: dict | None) -> None:
        # The user's callbacks get the chunk's on_epoch_end only now, with the val_* metrics.
        if self.callbacks is not None:
            self.callbacks.deliver_epoch_end(metrics)

    def _train_chunks(self, op: Any, target: int) -> loop_core.ChunkEnd | None:
        """One `fit` call training one or more chunks; the driver ends each chunk."""
        length, chunks = self._chunks_per_fit(target)
        data = self.spec.train.fit_kwargs(self.steps, self.steps + length * chunks)
        driver = _flavor.specialise(_ChunkDriverMixin, self.keras_module)(
            self, op, target, length, chunks
        )
        # The user's callbacks first: their on_epoch_end is held back until the driver validated.
        callbacks = [self.callbacks, driver] if self.callbacks is not None else [driver]
        original_fit(
            self.model,
            **data,
            epochs=self._epoch + chunks,
            initial_epoch=self._epoch,
            steps_per_epoch=length if chunks > 1 else None,
            verbose=0,
            callbacks=callbacks,
            class_weight=self.spec.class_weight,
        )
        if driver.outcome in (_REPLAN, loop_core.ChunkEnd.PREEMPTED):
            self.model.stop_training = False  # set by the driver, not by the user
        if driver.chunks_left and driver.outcome is None:
            # fit ended before its last epoch without our asking: treat it as a user stop.
            self.result.stopped_early = True
            return loop_core.ChunkEnd.STOPPED
        return driver.outcome if isinstance(driver.outcome, loop_core.ChunkEnd) else None

    def _chunks_per_fit(self, target: int) -> tuple[int, int]:
        """(chunk length, number of chunks) for the next `fit` call."""
        length = self.chunk_end(target) - self.steps
        execution = _flavor.steps_per_execution(self.model)
        if length % execution:
            if not self._warned_execution:
                self._warned_execution = True
                logger.warning(
                    "chunks of %d batches are not a multiple of steps_per_execution=%d: training calls fit() "
                    "once per chunk, which is slower; make scheduling_unit and the validation/checkpoint "
                    "periods multiples of steps_per_execution",
                    length,
                    execution,
                )
            return length, 1
        batch_bytes = self.spec.train.bytes_per_batch()
        if self.spec.train.streams:
            most = math.ceil((target - self.steps) / length)  # nothing held in memory: no budget
        else:
            most = (
                max(1, FIT_DATA_BUDGET_BYTES // max(1, length * batch_bytes)) if batch_bytes else 1
            )
        lengths = self.plan.next_chunk_lengths(
            self.steps, self.last_validation, self.last_checkpoint, target, most
        )
        chunks = 1
        while chunks < len(lengths) and lengths[chunks] == length:
            chunks += 1
        return length, chunks

    def _evaluate(self) -> dict:
        results = self.model.evaluate(**self.spec.validation, return_dict=True, verbose=0)
        return {f"val_{name}": float(value) for name, value in results.items()}

    def _checkpoint_metadata(self) -> dict:
        import tensorflow as tf

        return {
            "framework": f"tensorflow-{tf.__version__}",
            "format": "keras",
            "keras": _flavor.TF_KERAS if _flavor.is_tf_keras(self.keras_module) else _flavor.KERAS3,
        }

    def _save(self, path: pathlib.Path) -> None:
        if _flavor.is_tf_keras(self.keras_module):
            # tf_keras' .keras file leaves out a legacy optimizer's state: the weights and the
            # optimizer are restored from TensorFlow's checkpoint format (Determined's file name).
            self.model.save_weights(str(path / TF_KERAS_WEIGHTS))
        self.model.save(path / MODEL_FILE)
        if self.callbacks is not None:
            self.callbacks.checkpoint_end(str(path))

    def _load(self, path: pathlib.Path, metadata: dict, storage_id: str) -> int:
        if (
            _flavor.is_tf_keras(self.keras_module)
            and path.joinpath(TF_KERAS_WEIGHTS + ".index").exists()
        ):
            # TensorFlow's format restores the optimizer's slots when they are created.
            self.model.load_weights(str(path / TF_KERAS_WEIGHTS))
        else:
            self._load_keras_file(path / MODEL_FILE)
        steps = int(metadata.get("steps_completed", int(self.model.optimizer.iterations.numpy())))
        steps = int(metadata.get("steps_completed", int(self.model.optimizer.iterations.numpy())))
        report_every = self.plan.report
        self._epoch = steps // report_every.batches if isinstance(report_every, Every) else 0
        return steps

    def _load_keras_file(self, file: pathlib.Path) -> None:
        if not self.model.built:
            self.model(self.spec.train.sample_inputs())
        optimizer = self.model.optimizer
        if not getattr(optimizer, "built", getattr(optimizer, "_built", True)):
            # Without building first, load_weights would skip the optimizer's state.
            optimizer.build(self.model.trainable_variables)
        self.model.load_weights(file)


def format_table(reports: list[Report]) -> str:
    """One row per batch count: the training and validation metrics reported at it.

    Args:
        reports: the loop's reports.

    Returns:
        The table as text (see `determined._loop.format_table`).
    """
    return loop_core.format_table(reports)
