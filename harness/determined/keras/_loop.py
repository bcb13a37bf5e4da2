"""The managed Keras training loop: searcher lengths, validation, checkpoints, preemption, resume.

Keras' own `fit` does the training. A chunk ends at the next multiple of `scheduling_unit`, the
next validation or checkpoint boundary, or the end of the searcher operation, so chunk
boundaries depend only on the step count: a resumed trial cuts its chunks where an
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
import enum
import json
import logging
import math
import pathlib
import time
from collections.abc import Callable, Iterable
from typing import Any

import keras

from determined import errors
from determined.common import expconf
from determined.keras import _data
from determined.keras._callback import numeric_logs
from determined.keras._context import FitArguments, check_compiled, original_fit

logger = logging.getLogger("determined.keras")

MODEL_FILE = "model.keras"

# The most training data (bytes) one `fit` call may be handed when chunks share it: the arrays
# are gathered (copied) for the call, and tf.data copies them once more.
FIT_DATA_BUDGET_BYTES = 64 * 1024 * 1024
# The least time between two progress reports between chunks on the master.
PROGRESS_INTERVAL_S = 1.0


class LoopMode(str, enum.Enum):
    CLUSTER = "cluster"  # a trial run by the master: searcher operations, preemption
    LOCAL = "local"  # real training in this process for searcher.max_length
    TEST = "test"  # one batch, validation, checkpoint


@dataclasses.dataclass
class TrainingSpec:
    model: Any
    train: _data.BatchSource
    validation: dict  # evaluate() keyword arguments
    callbacks: list
    class_weight: Any = None


@dataclasses.dataclass
class Report:
    group: str  # "training" or "validation"
    steps_completed: int
    metrics: dict


@dataclasses.dataclass
class LoopResult:
    steps_completed: int
    reports: list[Report]
    checkpoints: list[str]
    preempted: bool = False
    stopped_early: bool = False
    searcher_metrics: list[float] = dataclasses.field(default_factory=list)

    def history(self) -> keras.callbacks.History:
        """The reports as a Keras History (`history.history[name]` lists, in report order)."""
        history = keras.callbacks.History()
        history.history = {}
        for report in self.reports:
            for name, value in report.metrics.items():
                history.history.setdefault(name, []).append(value)
        history.epoch = sorted({r.steps_completed for r in self.reports})
        return history


class ChunkedCallbacks(keras.callbacks.Callback):
    """Shows the user's callbacks one training run although `fit` is called once per chunk.

    `on_train_begin` reaches them once (so e.g. EarlyStopping keeps its patience across chunks),
    `on_train_end` once at the very end, and each chunk's `on_epoch_end` is held back until the
    loop has validated, so its logs carry the `val_*` metrics when a validation happened there.
    """

    def __init__(self, callbacks: list) -> None:
        super().__init__()
        self.inner = keras.callbacks.CallbackList(list(callbacks))
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
        super().set_model(model)
        self.inner.set_model(model)

    def set_params(self, params: Any) -> None:
        super().set_params(params)
        self.inner.set_params(params)

    def on_train_begin(self, logs: Any = None) -> None:
        if not self._began:
            self._began = True
            self.inner.on_train_begin(logs)

    def on_train_end(self, logs: Any = None) -> None:
        pass  # see finish()

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.inner.on_epoch_begin(epoch, logs)

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

    def finish(self, logs: dict | None) -> None:
        if self._began:
            self.inner.on_train_end(logs)


class _ChunkEnd(enum.Enum):
    """Why `fit` was told to stop before its last epoch (chunk)."""

    STOPPED = "stopped"  # model.stop_training or context.set_stop_requested(True)
    PREEMPTED = "preempted"  # checkpointed; the trial exits
    REPLAN = "replan"  # the next chunk is not the length this fit call was set up for


class _ChunkDriver(keras.callbacks.Callback):
    """Runs the loop's between-chunk work at each chunk's (Keras epoch's) end, inside `fit`."""

    def __init__(self, loop: ManagedLoop, op: Any, target: int, length: int, chunks: int) -> None:
        super().__init__()
        self.loop, self.op, self.target = loop, op, target
        self.length, self.chunks_left = length, chunks
        self.outcome: _ChunkEnd | None = None

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self.chunks_left -= 1
        outcome = self.loop._end_chunk(self.op, self.target, self.length, logs)
        if (
            outcome is None
            and self.chunks_left > 0
            and self.loop._chunk_end(self.target) != self.loop.steps + self.length
        ):
            outcome = _ChunkEnd.REPLAN
        if outcome is not None:
            self.outcome = outcome
            self.loop.model.stop_training = True


class _LocalOperation:
    """One "train to `length` batches" operation when no master hands them out."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.completed_with: Any = None

    def report_progress(self, length: float) -> None:
        pass

    def report_completed(self, searcher_metric: Any) -> None:
        self.completed_with = searcher_metric


def spec_from_fit(
    model: Any, fit: FitArguments, *, batch_size: int, seed: int, fit_config: dict
) -> TrainingSpec:
    check_compiled(model)
    shuffle = fit_config.get("shuffle", fit.shuffle)
    return TrainingSpec(
        model=model,
        train=_data.training_source(
            fit.x, fit.y, fit.sample_weight, batch_size=batch_size, shuffle=shuffle, seed=seed
        ),
        validation=_data.validation_kwargs(fit.validation_data, batch_size=batch_size),
        callbacks=list(fit.callbacks),
        class_weight=fit_config.get("class_weight", fit.class_weight),
    )


class Lengths:
    """Converts config lengths (batches, records, epochs) into batches."""

    def __init__(self, config: dict, global_batch_size: int, records_per_epoch: int | None) -> None:
        self.config = config
        self.batch_size = global_batch_size
        self.records_per_epoch = int(config.get("records_per_epoch") or 0) or records_per_epoch

    def batches(self, unit: str | None, amount: int, where: str) -> int:
        try:
            return expconf.unit_to_batches(
                unit,
                amount,
                global_batch_size=self.batch_size,
                records_per_epoch=self.records_per_epoch,
                where=where,
            )
        except expconf.LengthError as exc:
            hint = " (or train on arrays, whose length is known)" if unit == "epochs" else ""
            raise errors.InvalidExperimentException(f"{exc}{hint}") from None

    def of(self, key: str) -> int:
        length = self.config.get(key)
        if length is None:
            return 0
        unit, amount = expconf.length_of(length)
        return self.batches(unit, amount, key)

    def searcher_unit(self) -> str | None:
        max_length = (self.config.get("searcher") or {}).get("max_length")
        if max_length is None:
            return None
        return expconf.length_of(max_length)[0]

    def max_length(self) -> int:
        searcher = self.config.get("searcher") or {}
        if searcher.get("max_length") is None:
            raise errors.InvalidExperimentException(
                "searcher.max_length is required to train locally (e.g. max_length: {batches: 500})"
            )
        unit, amount = expconf.length_of(searcher["max_length"])
        return self.batches(unit, amount, "searcher.max_length")

    def to_units(self, unit: str | None, batches: int) -> float:
        return expconf.batches_to_units(
            unit,
            batches,
            global_batch_size=self.batch_size,
            records_per_epoch=self.records_per_epoch,
        )


class ManagedLoop:
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
        self.core = core_context
        self.spec = spec
        self.model = spec.model
        self.mode = LoopMode(mode)
        self.lengths = Lengths(config, global_batch_size, spec.train.records)
        self.scheduling_unit = (
            1 if self.mode is LoopMode.TEST else max(1, int(config.get("scheduling_unit") or 100))
        )
        self.validation_period = self.lengths.of("min_validation_period")
        self.checkpoint_period = self.lengths.of("min_checkpoint_period")
        self.searcher_metric = expconf.searcher_metric(config)
        self.latest_checkpoint = latest_checkpoint
        self.stop_requested = stop_requested
        self.on_report = on_report
        self.steps = 0
        self.last_validation = 0
        self.last_checkpoint = 0
        self.last_validation_metrics: dict | None = None
        self.result = LoopResult(0, [], [])
        self._epoch = 0
        self.callbacks = ChunkedCallbacks(spec.callbacks) if spec.callbacks else None
        self._warned_execution = False
        self._last_progress_report = -math.inf

    # --- the loop -----------------------------------------------------------------------------
    def _operations(self) -> Iterable[Any]:
        if self.mode is LoopMode.CLUSTER:
            return self.core.searcher.operations()
        length = 1 if self.mode is LoopMode.TEST else self.lengths.max_length()
        return [_LocalOperation(length)]

    def _op_target(self, op: Any) -> int:
        if self.mode is LoopMode.CLUSTER:
            return self.lengths.batches(
                self.lengths.searcher_unit(), op.length, "searcher operation"
            )
        return op.length

    def run(self) -> LoopResult:
        check_compiled(self.model)
        if self.latest_checkpoint:
            self._restore(self.latest_checkpoint)
        self._epoch = self.steps // self.scheduling_unit
        for op in self._operations():
            target = self._op_target(op)
            while self.steps < target:
                outcome = self._train_chunks(op, target)
                if outcome is _ChunkEnd.PREEMPTED:
                    return self._finish()
                if outcome is _ChunkEnd.STOPPED:
                    break
            metrics = (
                self._validate()
                if self.last_validation != self.steps or self.last_validation_metrics is None
                else self.last_validation_metrics
            )
            searcher_value = self._searcher_value(metrics)
            self.result.searcher_metrics.append(searcher_value)
            if self.mode is LoopMode.CLUSTER:
                op.report_progress(op.length)
            op.report_completed(searcher_value)
            if self.result.stopped_early:
                break
        self._checkpoint_if_needed()
        if self.result.stopped_early and self.mode is LoopMode.CLUSTER:
            from determined.core import EarlyExitReason

            self.core.train.report_early_exit(EarlyExitReason.USER_REQUESTED_STOP)
        return self._finish()

    def _finish(self) -> LoopResult:
        self.result.steps_completed = self.steps
        if self.callbacks is not None:
            self.callbacks.finish(self.last_validation_metrics)
        return self.result

    def _chunk_end(self, target: int) -> int:
        return self._chunk_end_from(self.steps, self.last_validation, self.last_checkpoint, target)

    def _chunk_end_from(
        self, steps: int, last_validation: int, last_checkpoint: int, target: int
    ) -> int:
        end = min(target, (steps // self.scheduling_unit + 1) * self.scheduling_unit)
        if self.validation_period:
            end = min(end, last_validation + self.validation_period)
        if self.checkpoint_period:
            end = min(end, last_checkpoint + self.checkpoint_period)
        return max(end, steps + 1)

    def _next_chunk_lengths(self, target: int, most: int) -> list[int]:
        """The lengths of the next (at most `most`) chunks as `_end_chunk` will cut them if
        training is not stopped: the same bookkeeping, run ahead on copies."""
        steps, last_validation, last_checkpoint = (
            self.steps,
            self.last_validation,
            self.last_checkpoint,
        )
        lengths: list[int] = []
        while steps < target and len(lengths) < most:
            end = self._chunk_end_from(steps, last_validation, last_checkpoint, target)
            lengths.append(end - steps)
            steps = end
            if (
                self.validation_period and steps - last_validation >= self.validation_period
            ) or steps == target:
                last_validation = steps
            if self.checkpoint_period and steps - last_checkpoint >= self.checkpoint_period:
                last_checkpoint = steps
        return lengths

    def _chunks_per_fit(self, target: int) -> tuple[int, int]:
        """(chunk length, number of chunks) for the next `fit` call."""
        length = self._chunk_end(target) - self.steps
        execution = max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))
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
        lengths = self._next_chunk_lengths(target, most)
        chunks = 1
        while chunks < len(lengths) and lengths[chunks] == length:
            chunks += 1
        return length, chunks

    def _user_stopped(self) -> bool:
        if getattr(self.model, "stop_training", False) or self.stop_requested():
            logger.info(
                "training stop requested at step %d (model.stop_training / set_stop_requested)",
                self.steps,
            )
            self.result.stopped_early = True
        return self.result.stopped_early

    def _report_progress(self, op: Any, target: int) -> None:
        # `op.report_progress` is a synchronous POST (~1-2 ms of this thread): at most once per
        # PROGRESS_INTERVAL_S between chunks; run() reports the op's full length at its end.
        if self.mode is LoopMode.CLUSTER:
            now = time.monotonic()
            if now - self._last_progress_report < PROGRESS_INTERVAL_S:
                return
            self._last_progress_report = now
            done = self.lengths.to_units(self.lengths.searcher_unit(), self.steps)
            op.report_progress(min(float(op.length), done))

    # --- steps --------------------------------------------------------------------------------
    def _train_chunks(self, op: Any, target: int) -> _ChunkEnd | None:
        """One `fit` call training one or more chunks; the driver ends each chunk."""
        length, chunks = self._chunks_per_fit(target)
        data = self.spec.train.fit_kwargs(self.steps, self.steps + length * chunks)
        driver = _ChunkDriver(self, op, target, length, chunks)
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
        if driver.outcome in (_ChunkEnd.REPLAN, _ChunkEnd.PREEMPTED):
            self.model.stop_training = False  # set by the driver, not by the user
        if driver.chunks_left and driver.outcome is None:
            # fit ended before its last epoch without our asking: treat it as a user stop.
            self.result.stopped_early = True
            return _ChunkEnd.STOPPED
        return driver.outcome

    def _end_chunk(self, op: Any, target: int, length: int, logs: Any) -> _ChunkEnd | None:
        """After a chunk: report its training metrics, validate, checkpoint, check for a stop."""
        start = self.steps
        end = start + length
        if getattr(self.model, "stop_training", False):
            trained = int(self.model.optimizer.iterations.numpy())
            if start <= trained < end:
                end = trained  # a callback stopped training inside the chunk
        self._epoch += 1
        self.steps = end
        metrics = numeric_logs(logs)
        self._report(Report("training", end, metrics))
        self.core.train.report_training_metrics(steps_completed=end, metrics=metrics)

        validated = None
        if self.validation_period and self.steps - self.last_validation >= self.validation_period:
            validated = self._validate()
        elif self.steps == target:  # the op's own validation comes next: let callbacks see it
            validated = self._validate()
        if self.callbacks is not None:
            self.callbacks.deliver_epoch_end(validated)
        if self.checkpoint_period and self.steps - self.last_checkpoint >= self.checkpoint_period:
            self._checkpoint()
        if self._user_stopped():
            return _ChunkEnd.STOPPED
        if self.mode is LoopMode.CLUSTER and self.core.preempt.should_preempt():
            logger.info("preempted at step %d: checkpointing and exiting", self.steps)
            self._checkpoint_if_needed()
            self.result.preempted = True
            return _ChunkEnd.PREEMPTED
        self._report_progress(op, target)
        return None

    def _validate(self) -> dict:
        results = self.model.evaluate(**self.spec.validation, return_dict=True, verbose=0)
        metrics = {f"val_{name}": float(value) for name, value in results.items()}
        self.last_validation, self.last_validation_metrics = self.steps, metrics
        self._report(Report("validation", self.steps, metrics))
        self.core.train.report_validation_metrics(steps_completed=self.steps, metrics=metrics)
        return metrics

    def _searcher_value(self, metrics: dict) -> float:
        name = self.searcher_metric
        if name is None:
            return float(metrics.get("val_loss", next(iter(metrics.values()), 0.0)))
        for candidate in (name, f"val_{name}"):
            if candidate in metrics:
                return metrics[candidate]
        raise errors.InvalidExperimentException(
            f"searcher.metric: {name!r} is not among the validation metrics ({', '.join(sorted(metrics))}); "
            "name one of them (validation metrics are Keras' metric names prefixed with 'val_')"
        )

    def _report(self, report: Report) -> None:
        self.result.reports.append(report)
        if self.on_report is not None:
            self.on_report(report)

    # --- checkpoints --------------------------------------------------------------------------
    def _checkpoint_if_needed(self) -> None:
        if self.last_checkpoint != self.steps or not self.result.checkpoints:
            self._checkpoint()

    def _checkpoint(self) -> str:
        import tensorflow as tf

        metadata = {
            "steps_completed": self.steps,
            "framework": f"tensorflow-{tf.__version__}",
            "format": "keras",
            "last_validation_steps": self.last_validation,
            "last_checkpoint_steps": self.steps,
        }
        with self.core.checkpoint.store_path(metadata) as (path, storage_id):
            self.model.save(pathlib.Path(path) / MODEL_FILE)
        self.last_checkpoint = self.steps
        self.result.checkpoints.append(storage_id)
        logger.info("checkpoint %s at step %d", storage_id, self.steps)
        return storage_id

    def _restore(self, storage_id: str) -> None:
        with self.core.checkpoint.restore_path(storage_id) as path:
            path = pathlib.Path(path)
            metadata_file = path / "metadata.json"
            metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
            if not self.model.built:
                self.model(self.spec.train.sample_inputs())
            if not self.model.optimizer.built:
                # Without building first, load_weights would skip the optimizer's state.
                self.model.optimizer.build(self.model.trainable_variables)
            self.model.load_weights(path / MODEL_FILE)
        self.steps = int(
            metadata.get("steps_completed", int(self.model.optimizer.iterations.numpy()))
        )
        self.last_validation = int(metadata.get("last_validation_steps", self.steps))
        self.last_checkpoint = int(metadata.get("last_checkpoint_steps", self.steps))
        self.result.checkpoints.append(storage_id)
        logger.info("resumed from checkpoint %s at step %d", storage_id, self.steps)


# ---------------------------------------------------------------------------------------------
# metric tables (local mode)


def format_table(reports: list[Report]) -> str:
    """One row per step: the training metrics and validation metrics reported at it."""
    rows: dict[int, dict] = {}
    for report in reports:
        rows.setdefault(report.steps_completed, {}).update(report.metrics)
    names: list[str] = []
    for report in reports:
        for name in report.metrics:
            if name not in names:
                names.append(name)
    header = ["batches", *names]
    lines = [header]
    for steps in sorted(rows):
        values = rows[steps]
        lines.append([str(steps)] + [f"{values[n]:.4f}" if n in values else "" for n in names])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=False))
        for line in lines
    ]
    out.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(out)
