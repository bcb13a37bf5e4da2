"""`det.keras.DeterminedCallback`: Determined 0.38's way to run a plain `model.fit` under the Core API.

    with det.core.init() as core_context:
        info = det.get_cluster_info()
        callback = det.keras.DeterminedCallback(
            core_context, checkpoint=info.latest_checkpoint if info else None,
            continue_id=info.trial.trial_id if info else 0)
        model.fit(x, y, epochs=10, validation_data=(xv, yv), callbacks=[callback])

Metrics go to the master (training every epoch or every N batches; `val_*` logs as validation
metrics), checkpoints (`model_checkpoint.keras`, weights and optimizer state) every
`checkpoint_epochs` epochs and at the end, preemption is checked every epoch. Resuming a
checkpoint whose `continue_id` matches continues at its epoch (fit's `initial_epoch` is
overridden); a different `continue_id` only starts from its weights (a warm start).
"""

from __future__ import annotations

import json
import logging
import pathlib
import tempfile
from typing import Any

import keras

from determined.keras import _flavor, _tensorboard

logger = logging.getLogger("determined.keras")

CHECKPOINT_FILE = "model_checkpoint.keras"


class DeterminedCallback(keras.callbacks.Callback):
    def __init__(
        self,
        core_context: Any,
        checkpoint: str | None,
        continue_id: int | str,
        *,
        train_metrics_report_period: int | str = "epoch",
        checkpoint_epochs: int = 1,
    ) -> None:
        super().__init__()
        if train_metrics_report_period != "epoch" and not (
            isinstance(train_metrics_report_period, int) and train_metrics_report_period > 0
        ):
            raise ValueError(
                "train_metrics_report_period: 'epoch' or a positive number of batches, "
                f"got {train_metrics_report_period!r}"
            )
        if not isinstance(checkpoint_epochs, int) or checkpoint_epochs < 0:
            raise ValueError(
                f"checkpoint_epochs: a number of epochs >= 0 (0: only at the end), got {checkpoint_epochs!r}"
            )
        self._core = core_context
        self._checkpoint = checkpoint
        self._continue_id = continue_id
        self._report_period = train_metrics_report_period
        self._checkpoint_epochs = checkpoint_epochs
        self._epochs_completed = 0
        self._last_checkpoint_epoch: int | None = None
        self._batch_logs: list[dict] = []
        self.preempted = False
        self.last_checkpoint: str | None = None

    # tf_keras (Keras 2) models' fit asks every callback these; Keras 3's base class has none.
    def _implements_train_batch_hooks(self) -> bool:
        return self._report_period != "epoch"

    def _implements_test_batch_hooks(self) -> bool:
        return False

    def _implements_predict_batch_hooks(self) -> bool:
        return False

    def _is_chief(self) -> bool:
        # Metrics and progress are the chief's to report (Determined's callback does the same).
        distributed = getattr(self._core, "distributed", None)
        return distributed is None or distributed.rank == 0

    def _steps(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    # --- resume -------------------------------------------------------------------------------
    def on_train_begin(self, logs: Any = None) -> None:
        self.preempted = False
        if not self._checkpoint:
            return
        with self._core.checkpoint.restore_path(self._checkpoint) as path:
            path = pathlib.Path(path)
            metadata_file = path / "metadata.json"
            metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
            resume = metadata.get("continue_id") == self._continue_id
            optimizer = self.model.optimizer
            keras3 = isinstance(self.model, keras.Model)  # else tf_keras (Keras 2)
            if keras3 and resume and not optimizer.built:
                # Without building first, load_weights would skip the optimizer's state.
                optimizer.build(self.model.trainable_variables)
            fresh_optimizer_state = (
                [v.numpy() for v in optimizer.variables] if keras3 and optimizer.built else None
            )
            self.model.load_weights(path / CHECKPOINT_FILE)
            if not resume and fresh_optimizer_state is not None:
                # A warm start takes the weights only; the optimizer starts afresh.
                for variable, value in zip(
                    optimizer.variables, fresh_optimizer_state, strict=False
                ):
                    variable.assign(value)
        if resume:
            self._epochs_completed = int(metadata.get("epochs_completed", 0))
            self._last_checkpoint_epoch = self._epochs_completed
            # fit() reads where to start after on_train_begin: Keras 3 its `_initial_epoch`,
            # tf_keras its worker training state (as keras' BackupAndRestore sets it).
            self.model._initial_epoch = self._epochs_completed
            if not isinstance(self.model, keras.Model):
                self.model._training_state = _StartAt(self._epochs_completed)
            logger.info(
                "resuming checkpoint %s at epoch %d", self._checkpoint, self._epochs_completed
            )
        else:
            logger.info("warm start from checkpoint %s (its continue_id differs)", self._checkpoint)
        self._checkpoint = (
            None  # a second fit() with this callback continues from the model as it is
        )

    # --- reporting ----------------------------------------------------------------------------
    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self._report_period == "epoch":
            return
        self._batch_logs.append(numeric_logs(logs))
        steps = self._steps()
        if steps % int(self._report_period) == 0:
            self._report_batches(steps)

    def _report_batches(self, steps: int) -> None:
        if not self._batch_logs:
            return
        names = set().union(*self._batch_logs)
        averaged = {
            n: sum(logs[n] for logs in self._batch_logs if n in logs)
            / sum(n in logs for logs in self._batch_logs)
            for n in names
        }
        if self._is_chief():
            self._core.train.report_training_metrics(steps_completed=steps, metrics=averaged)
        self._batch_logs = []

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        logs = numeric_logs(logs)
        steps = self._steps()
        self._epochs_completed = epoch + 1
        training = {k: v for k, v in logs.items() if not k.startswith("val_")}
        validation = {k: v for k, v in logs.items() if k.startswith("val_")}
        chief = self._is_chief()
        if self._report_period == "epoch":
            if chief:
                self._core.train.report_training_metrics(
                    steps_completed=steps, metrics={**training, "epochs": epoch + 1}
                )
        else:
            self._report_batches(steps)
        if validation and chief:
            self._core.train.report_validation_metrics(
                steps_completed=steps, metrics={**validation, "epochs": epoch + 1}
            )
        epochs = (self.params or {}).get("epochs")
        if epochs and chief:
            self._core.train.report_progress(min(1.0, (epoch + 1) / epochs))
        if self._checkpoint_epochs and (epoch + 1) % self._checkpoint_epochs == 0:
            self._save(steps)
        if self._core.preempt.should_preempt():
            if self._last_checkpoint_epoch != self._epochs_completed:
                self._save(steps)
            logger.info("preempted after epoch %d: stopping training", epoch + 1)
            self.preempted = True
            self.model.stop_training = True

    def on_train_end(self, logs: Any = None) -> None:
        self.model._initial_epoch = None  # only the fit() that resumed starts late
        if isinstance(getattr(self.model, "_training_state", None), _StartAt):
            self.model._training_state = None
        if self._last_checkpoint_epoch != self._epochs_completed:
            self._save(self._steps())

    def _save(self, steps: int) -> str:
        metadata = {
            "steps_completed": steps,
            "epochs_completed": self._epochs_completed,
            "continue_id": self._continue_id,
            "format": "keras",
        }
        # Every rank saves (MultiWorkerMirroredStrategy's save is collective), so every rank
        # calls store_path (shard=True); only the chief's file is kept, as in Determined.
        with self._core.checkpoint.store_path(metadata, shard=True) as (path, storage_id):
            if self._is_chief():
                self.model.save(pathlib.Path(path) / CHECKPOINT_FILE)
            else:
                with tempfile.TemporaryDirectory(prefix="det-worker-model-") as scratch:
                    self.model.save(pathlib.Path(scratch) / CHECKPOINT_FILE)
        self._last_checkpoint_epoch = self._epochs_completed
        self.last_checkpoint = storage_id
        return storage_id


class _StartAt:
    """tf_keras' worker training state, saying which epoch `fit` starts at (a resume)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def maybe_load_initial_counters_from_ckpt(self, *_: Any, **__: Any) -> tuple[int, int]:
        return self.epoch, 0  # checkpoints are taken at epoch ends

    def maybe_load_initial_epoch_from_ckpt(self, *_: Any, **__: Any) -> int:
        return self.epoch


def numeric_logs(logs: Any) -> dict[str, float]:
    """The entries of Keras `logs` that are numbers, as floats (the metrics Determined stores)."""
    return {name: float(value) for name, value in (logs or {}).items() if _is_number(value)}


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


class TensorBoard(_flavor.default_module().callbacks.TensorBoard):  # type: ignore[misc]
    """`det.keras.TensorBoard` (Determined 0.38): Keras' TensorBoard callback, used with
    `DeterminedCallback`, writing into `core_context.train.get_tensorboard_path()` when the core
    context has one (on the master; a given `log_dir` is then ignored), else into `log_dir`.
    Event files are flushed after every epoch, so the Core API's uploads after each metrics
    report carry them.

    Args:
        core_context: the `det.core.init()` context.
        *args, **kwargs: Keras' TensorBoard arguments.
    """

    def __init__(self, core_context: Any, *args: Any, **kwargs: Any) -> None:
        path = core_context.train.get_tensorboard_path()
        if path:
            if "log_dir" in kwargs:
                logger.warning(
                    "arg log_dir=%s to det.keras.TensorBoard will be ignored", kwargs.pop("log_dir")
                )
            elif args:
                logger.warning("arg log_dir=%s to det.keras.TensorBoard will be ignored", args[0])
                args = args[1:]
            args = (str(path), *args)
        super().__init__(*args, **kwargs)

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        super().on_epoch_end(epoch, logs)
        _tensorboard.flush_writers(self)
