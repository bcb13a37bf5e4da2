"""`det.keras.callbacks`: Determined's Keras callbacks for `TFKerasTrial` and the Native API.

Each class derives from what `tf.keras` is in this process: Keras 3, or tf_keras under
`TF_USE_LEGACY_KERAS=1` (a Keras' callbacks only work with that Keras' models).

* `Callback`: a Keras callback with Determined's extra hooks. The managed loop calls
  `on_train_workload_begin/end` around each chunk of training (one Keras epoch per chunk) and
  `on_checkpoint_end(checkpoint_dir)` after writing a checkpoint.
* `EarlyStopping`, `ReduceLROnPlateau`: Keras' own, acting after each validation only (Keras'
  `on_epoch_end` is called per chunk, with the `val_*` metrics when the chunk validated).
* `TensorBoard`: Keras' TensorBoard callback writing into the trial's TensorBoard directory,
  which Determined uploads to checkpoint storage after every metrics report.

`get_state`/`load_state` exist for compatibility; the loop does not store callback state in
checkpoints.
"""

from __future__ import annotations

import logging
from typing import Any

from determined.keras import _flavor, _tensorboard

logger = logging.getLogger("determined.keras")

_KERAS = _flavor.default_module()


class Callback(_KERAS.callbacks.Callback):  # type: ignore[name-defined]
    """A Keras callback with Determined's hooks (all optional to implement)."""

    def on_train_workload_begin(
        self, total_batches_trained: int, batches_requested: int | None, logs: dict
    ) -> None:
        """Before a chunk of training.

        Args:
            total_batches_trained: batches trained before the chunk.
            batches_requested: the chunk's length, when known (None here).
            logs: an empty dict.
        """

    def on_train_workload_end(self, total_batches_trained: int, logs: dict) -> None:
        """After a chunk of training (and its validation, if one was due).

        Args:
            total_batches_trained: batches trained so far.
            logs: the chunk's training metrics.
        """

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """After a checkpoint was written.

        Args:
            checkpoint_dir: the directory the checkpoint was written to.
        """

    def get_state(self) -> Any:
        """State to keep in a checkpoint (not stored by this implementation)."""
        return None

    def load_state(self, state: Any) -> None:
        """Restore what `get_state()` returned."""


class EarlyStopping(_KERAS.callbacks.EarlyStopping, Callback):  # type: ignore[name-defined]
    """Keras' EarlyStopping, checked after each validation (not after every chunk)."""

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs and self.monitor in logs:
            super().on_epoch_end(epoch, logs)


class ReduceLROnPlateau(_KERAS.callbacks.ReduceLROnPlateau, Callback):  # type: ignore[name-defined]
    """Keras' ReduceLROnPlateau, checked after each validation (not after every chunk)."""

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs and self.monitor in logs:
            super().on_epoch_end(epoch, logs)


class TensorBoard(_KERAS.callbacks.TensorBoard, Callback):  # type: ignore[name-defined]
    """Keras' TensorBoard callback, writing into the trial's TensorBoard directory.

    A `log_dir` argument is ignored (as in Determined): the directory is the trial's, known when
    training starts. The event files are flushed after every chunk so that each upload to
    checkpoint storage holds the summaries written so far. Other arguments are Keras'.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        user_log_dir = kwargs.pop("log_dir", None)
        if user_log_dir is None and args and isinstance(args[0], str):
            user_log_dir, args = args[0], args[1:]
        if user_log_dir is not None:
            logger.warning(
                "arg log_dir=%s to det.keras.callbacks.TensorBoard will be ignored", user_log_dir
            )
        super().__init__(str(_tensorboard.active_path()), *args, **kwargs)

    def set_model(self, model: Any) -> None:
        self.log_dir = str(_tensorboard.active_path())
        super().set_model(model)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        _tensorboard.flush_writers(self)


__all__ = ["Callback", "EarlyStopping", "ReduceLROnPlateau", "TensorBoard"]
