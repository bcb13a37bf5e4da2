"""`det.estimator.EstimatorTrial`: the Trial API for tf.estimator (Determined <= 0.24; TensorFlow <= 2.15)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from determined.estimator._context import EstimatorTrialContext


class EstimatorTrial:
    """Subclass it and implement `build_estimator`, `build_train_spec` and `build_validation_spec`.

    Run it with `entrypoint: model_def:MyEstimatorTrial` or `det.experimental.create(MyEstimatorTrial, ...)`.
    `build_estimator()` may return a `tf.estimator.Estimator` or a v1 one
    (`tf.compat.v1.estimator.DNNClassifier`, ...). How long to train comes from the searcher, not
    from `TrainSpec.max_steps`: a training `tf.data.Dataset` is repeated as Determined does. The
    validation input should end (`EvalSpec(steps=None)` evaluates all of it).
    """

    trial_context_class = EstimatorTrialContext

    def __init__(self, context: EstimatorTrialContext) -> None:
        """Keep the trial's context (hyperparameters, batch sizes, `wrap_optimizer`, ...).

        Args:
            context: made by the harness; subclasses that override `__init__` must pass it on.
        """
        self.context = context

    def build_estimator(self) -> Any:
        """The Estimator to train, built from `self.context`'s hyperparameters.

        The harness trains it in a `model_dir` of its own (what Determined checkpoints is copied
        from there to checkpoint storage) and sets `tf_random_seed` to the trial seed where the
        `RunConfig` sets none; the rest of its configuration is used as given.

        Returns:
            A `tf.estimator.Estimator` or a `tf.compat.v1.estimator.Estimator` (e.g. a canned
            `DNNClassifier`).
        """
        raise NotImplementedError(
            "EstimatorTrial.build_estimator() must return a tf.estimator.Estimator"
        )

    def build_train_spec(self) -> Any:
        """What to train on.

        Returns:
            A `tf.estimator.TrainSpec`: its `input_fn` (a `tf.data.Dataset`, repeated as
            Determined does, or tensors) and `hooks` are used; `max_steps` is not (the searcher
            says how long to train).
        """
        raise NotImplementedError(
            "EstimatorTrial.build_train_spec() must return a tf.estimator.TrainSpec"
        )

    def build_validation_spec(self) -> Any:
        """What to validate on.

        Returns:
            A `tf.estimator.EvalSpec` whose `input_fn` ends (`steps=None` evaluates all of it);
            its metrics are the validation metrics the searcher reads.
        """
        raise NotImplementedError(
            "EstimatorTrial.build_validation_spec() must return a tf.estimator.EvalSpec"
        )

    def build_serving_input_receiver_fns(self) -> dict[str, Callable[[], Any]]:
        """Optional: name -> serving_input_receiver_fn; each checkpoint then holds a SavedModel per name."""
        return {}
