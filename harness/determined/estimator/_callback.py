"""`det.estimator.RunHook`: a `tf.estimator.SessionRunHook` with Determined's checkpoint/close callbacks.

This module imports TensorFlow; `determined.estimator` loads it only when `RunHook` is first used.
"""

from __future__ import annotations

import tensorflow as tf


class RunHook(tf.estimator.SessionRunHook):
    """A `tf.estimator.SessionRunHook` that also hears about Determined's checkpoints and the trial's end.

    Pass it in the `hooks` of the `tf.estimator.TrainSpec` (from `build_train_spec()` or given to
    `context.train_and_evaluate()`); it runs as a SessionRunHook in every training call, and:

    * `on_checkpoint_load(checkpoint_dir)` when the trial resumes from a checkpoint, before the
      estimator's variables are restored from it;
    * `on_checkpoint_end(checkpoint_dir)` after every checkpoint is written, with the directory being
      stored (files written there are part of the checkpoint);
    * `on_trial_close()` when training ends: finished, preempted, stopped or failed.
    """

    def on_checkpoint_load(self, checkpoint_dir: str) -> None:
        """Called when resuming from the checkpoint in `checkpoint_dir` (never on a fresh start)."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Called after each checkpoint has been written to `checkpoint_dir`."""

    def on_trial_close(self) -> None:
        """Called when the trial's training ends, however it ends: the place for clean-up."""
