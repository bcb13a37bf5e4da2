"""Running Keras training under Determined: in a trial (from the master) or locally in-process.

Entry points:
* `train_native(core_context, context, *, mode, latest_checkpoint)` — after the Native API's
  `fit()` has recorded its arguments;
* `train_trial_class(trial_class, core_context, *, config, hparams, ...)` — a `TFKerasTrial`;
* `run_keras_trial(trial_class, config, hparams, ...)` — a `TFKerasTrial` on the master or off
  it, with the same arguments as `determined.exec.harness.run_pytorch_trial`;
* `print_local_summary(...)` for `local=True` runs.

The flow shared with the Estimator (cluster or local, contexts, the loop's common arguments) is
`determined.experimental._framework`; what is Keras' is here: seeding with Keras, the Trial's
data loaders as a `TrainingSpec`, the `ManagedLoop`.
"""

from __future__ import annotations

import logging
from typing import Any

import keras

from determined import _loop as loop_core
from determined import errors
from determined.experimental import _framework
from determined.experimental._framework import silence_tensorflow
from determined.keras import _data, _flavor
from determined.keras._context import FitArguments, TFKerasNativeContext, TFKerasTrialContext
from determined.keras._loop import (
    LoopMode,
    LoopResult,
    ManagedLoop,
    TrainingSpec,
    spec_from_fit,
)
from determined.keras._trial import TFKerasTrial

logger = logging.getLogger("determined.keras")


def _loop(
    core_context: Any,
    context: Any,
    spec: TrainingSpec,
    mode: LoopMode,
    latest_checkpoint: str | None,
) -> LoopResult:
    loop = ManagedLoop(
        core_context,
        spec,
        **_framework.loop_arguments(context, mode=mode, latest_checkpoint=latest_checkpoint),
    )
    result = loop.run()
    # ManagedLoop.result_type is Keras' LoopResult (it adds history()).
    assert isinstance(result, LoopResult)
    return result


def train_native(
    core_context: Any,
    context: TFKerasNativeContext,
    *,
    mode: LoopMode,
    latest_checkpoint: str | None = None,
) -> LoopResult:
    """Train what the Native API's `fit()` recorded on `context`, in the managed loop."""
    fit: FitArguments | None = context._fit_arguments
    if fit is None or context._model is None:
        raise errors.InternalException("train_native() before fit() recorded the model and data")
    spec = spec_from_fit(
        context._model,
        fit,
        batch_size=context.get_per_slot_batch_size(),
        seed=context.get_trial_seed(),
        fit_config=context._fit_config,
    )
    return _loop(core_context, context, spec, mode, latest_checkpoint)


def _unpack_loader(data: Any) -> tuple[Any, Any, Any]:
    data = _data.unwrap_adapter(data)
    if isinstance(data, (tuple, list)) and len(data) in (2, 3):
        x, y, *rest = data
        return x, y, rest[0] if rest else None
    return data, None, None


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
    """Build a `TFKerasTrial` with its context and train it in the managed loop."""
    if not (isinstance(trial_class, type) and issubclass(trial_class, TFKerasTrial)):
        raise TypeError(f"{trial_class!r} is not a TFKerasTrial subclass")
    keras.utils.set_random_seed(trial_seed)
    context = _framework.new_trial_context(
        TFKerasTrialContext,
        core_context,
        config=config,
        hparams=hparams,
        trial_seed=trial_seed,
        trial_id=trial_id,
        experiment_id=experiment_id,
    )
    trial = trial_class(context)
    model = trial.build_model()
    if context._model is None:
        if _flavor.module_of(model) is None:
            raise errors.InvalidModelException(
                f"{trial_class.__name__}.build_model() must return a keras.Model or a "
                f"tf_keras.Model, got {type(model).__name__}"
            )
        logger.info(
            "%s.build_model() did not call context.wrap_model(); using the returned model",
            trial_class.__name__,
        )
        context._model = model
    batch_size = context.get_per_slot_batch_size()
    x, y, sample_weight = _unpack_loader(trial.build_training_data_loader())
    validation = trial.build_validation_data_loader()
    shuffle = context._fit_config.get("shuffle", True)
    spec = TrainingSpec(
        model=context._model,
        train=_data.training_source(
            x,
            y,
            sample_weight,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=trial_seed,
            keras_module=_flavor.module_of(context._model) or keras,
        ),
        validation=_data.validation_kwargs(validation, batch_size=batch_size),
        callbacks=list(trial.keras_callbacks() or []),
        class_weight=context._fit_config.get("class_weight"),
    )
    return _loop(core_context, context, spec, mode, latest_checkpoint)


def print_local_summary(result: LoopResult, *, test: bool, checkpoint_base: Any = None) -> None:
    """Print a local run's metric table and what it trained.

    Args:
        result: the loop's result.
        test: a `test=True` run (one batch).
        checkpoint_base: where the checkpoints are, if known.
    """
    loop_core.print_local_summary(result, test=test, checkpoint_base=checkpoint_base)


def run_keras_trial(
    trial_class: type,
    config: dict,
    hparams: dict | None,
    *,
    latest_checkpoint: str | None = None,
    on_cluster: bool,
    test_mode: bool = False,
) -> LoopResult:
    """Run a `TFKerasTrial` the way `determined.exec.harness.run_pytorch_trial` runs a PyTorchTrial.

    On the master: searcher operations, metrics and checkpoints through `det.core.init()`.
    Off it: real local training for `searcher.max_length` (or one batch with `test_mode`),
    with the metrics printed as a table.
    """
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
    "run_keras_trial",
    "silence_tensorflow",
    "train_native",
    "train_trial_class",
]
