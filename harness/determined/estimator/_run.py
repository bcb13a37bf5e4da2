"""Running Estimator training under Determined: in a trial (from the master) or locally in-process.

* `train(core_context, context, specs, *, mode, latest_checkpoint)` — the managed loop for the
  Native API (after `train_and_evaluate`) and for Trial classes;
* `run_estimator_trial(trial_class, config, hparams, ...)` — an `EstimatorTrial`, with the same
  arguments as `determined.exec.harness.run_pytorch_trial`;
* `print_local_summary(...)` for `local=True` runs.

The flow shared with Keras (cluster or local, contexts, the loop's common arguments) is
`determined.experimental._framework`; what is the Estimator's is here: seeding, checking the
Trial's specs, the `EstimatorLoop` and its model_dir.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from determined import _loop as loop_core
from determined import errors
from determined.estimator._availability import is_estimator, require_estimator
from determined.estimator._context import EstimatorTrialContext
from determined.estimator._loop import (
    EstimatorLoop,
    EstimatorSpecs,
    LoopMode,
    LoopResult,
)
from determined.estimator._trial import EstimatorTrial
from determined.experimental import _framework
from determined.experimental._framework import silence_tensorflow

logger = logging.getLogger("determined.estimator")


def seed_everything(seed: int) -> None:
    """Python's and numpy's generators; the graph seed is set per estimator by the loop."""
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:
        return
    np.random.seed(seed % (2**32))


def train(
    core_context: Any,
    context: Any,
    specs: EstimatorSpecs,
    *,
    mode: LoopMode,
    latest_checkpoint: str | None = None,
) -> LoopResult:
    """Train `specs` in the managed loop (Native API and Trial classes alike)."""
    loop = EstimatorLoop(
        core_context,
        specs,
        trial_seed=context.get_trial_seed(),
        **_framework.loop_arguments(context, mode=mode, latest_checkpoint=latest_checkpoint),
    )
    result = loop.run()
    assert isinstance(result, LoopResult)
    if mode is LoopMode.CLUSTER:
        loop.cleanup()  # everything worth keeping is in Determined's checkpoints
    return result


def specs_from_trial(trial: EstimatorTrial) -> EstimatorSpecs:
    """The trial's estimator and specs, checked (a clear error for each wrong return type)."""
    import tensorflow as tf

    name = type(trial).__name__
    estimator = trial.build_estimator()
    if not is_estimator(estimator):
        raise errors.InvalidModelException(
            f"{name}.build_estimator() must return a tf.estimator.Estimator (or a "
            f"tf.compat.v1.estimator.Estimator), got {type(estimator).__name__}"
        )
    train_spec, eval_spec = trial.build_train_spec(), trial.build_validation_spec()
    if not isinstance(train_spec, tf.estimator.TrainSpec):
        raise errors.InvalidModelException(
            f"{name}.build_train_spec() must return a tf.estimator.TrainSpec, got {type(train_spec).__name__}"
        )
    if not isinstance(eval_spec, tf.estimator.EvalSpec):
        raise errors.InvalidModelException(
            f"{name}.build_validation_spec() must return a tf.estimator.EvalSpec, got {type(eval_spec).__name__}"
        )
    serving = trial.build_serving_input_receiver_fns() or {}
    if not isinstance(serving, dict):
        raise errors.InvalidModelException(
            f"{name}.build_serving_input_receiver_fns() must return a dict (name -> serving_input_receiver_fn)"
        )
    return EstimatorSpecs(estimator, train_spec, eval_spec, serving)


def train_trial_class(
    trial_class: type,
    core_context: Any,
    *,
    config: dict,
    hparams: dict,
    trial_seed: int,
    mode: LoopMode,
    trial_id: int | None = None,
    experiment_id: int | None = None,
    latest_checkpoint: str | None = None,
) -> LoopResult:
    """Build an `EstimatorTrial` with its context and train it in the managed loop."""
    if not (isinstance(trial_class, type) and issubclass(trial_class, EstimatorTrial)):
        raise TypeError(f"{trial_class!r} is not an EstimatorTrial subclass")
    seed_everything(trial_seed)
    context = _framework.new_trial_context(
        EstimatorTrialContext,
        core_context,
        config=config,
        hparams=hparams,
        trial_seed=trial_seed,
        trial_id=trial_id,
        experiment_id=experiment_id,
    )
    specs = specs_from_trial(trial_class(context))
    return train(core_context, context, specs, mode=mode, latest_checkpoint=latest_checkpoint)


def print_local_summary(result: LoopResult, *, test: bool, checkpoint_base: Any = None) -> None:
    """Print a local run's metric table and what it trained.

    Args:
        result: the loop's result.
        test: a `test=True` run (one batch).
        checkpoint_base: where the checkpoints are, if known.
    """
    loop_core.print_local_summary(
        result,
        test=test,
        checkpoint_base=checkpoint_base,
        validation_prefix="val_",
        detail=f" (model_dir {result.model_dir})",
    )


def run_estimator_trial(
    trial_class: type,
    config: dict,
    hparams: dict | None,
    *,
    latest_checkpoint: str | None = None,
    on_cluster: bool,
    test_mode: bool = False,
) -> LoopResult:
    """Run an `EstimatorTrial` the way `determined.exec.harness.run_pytorch_trial` runs a PyTorchTrial.

    On the master: searcher operations, metrics and checkpoints through `det.core.init()`.
    Off it: real local training for `searcher.max_length` (or one batch with `test_mode`).
    """
    require_estimator(f"EstimatorTrial {getattr(trial_class, '__name__', trial_class)}")
    silence_tensorflow()
    return _framework.run_trial_class(
        train_trial_class,
        print_local_summary,
        trial_class,
        config,
        hparams,
        latest_checkpoint=latest_checkpoint,
        on_cluster=on_cluster,
        test_mode=test_mode,
    )


__all__ = [
    "print_local_summary",
    "run_estimator_trial",
    "seed_everything",
    "silence_tensorflow",
    "specs_from_trial",
    "train",
    "train_trial_class",
]
