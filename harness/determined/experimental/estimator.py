"""`det.experimental.estimator.init()`: the Native API for tf.estimator (Determined 0.12.5-0.15 form).

    context = det.experimental.estimator.init(config, context_dir=".")
    estimator = tf.estimator.DNNClassifier(..., config=context.wrap_run_config(tf.estimator.RunConfig()))
    context.train_and_evaluate(estimator, train_spec, eval_spec)

* user environment, `local=False`: submits the script as an experiment and exits (status 0);
* `local=True, test=True`: `train_and_evaluate()` trains one batch, validates, checkpoints in-process;
* `local=True, test=False`: `train_and_evaluate()` trains for real in-process, for `searcher.max_length`;
* inside a trial (re-executed by `determined.exec.native`): `init()` returns this trial's context
  and `train_and_evaluate()` hands over to the managed loop (searcher lengths, validation,
  checkpoints, preemption, resume).

The flow is `determined.experimental._framework.native_init`, shared with Keras; this module gives
it the Estimator's steps. `tf.estimator` exists only up to TensorFlow 2.15 (with
tensorflow-estimator). Elsewhere every mode raises `EstimatorUnavailable`, naming the installed
TensorFlow and what to install. TensorFlow is imported by the availability check only when it is
installed.
"""

from __future__ import annotations

from typing import Any

from determined.estimator._availability import (
    INSTALL_HINT,
    EstimatorUnavailable,
    estimator_available,
    require_estimator,
)
from determined.experimental import _framework
from determined.experimental._native import NATIVE_DEFAULTS

ESTIMATOR_DEFAULTS: dict = {
    **NATIVE_DEFAULTS,
    "searcher": {
        "name": "single",
        "metric": "loss",
        "smaller_is_better": True,
        "max_length": {"batches": 100},
    },
}


def init(
    config: dict | str | None = None,
    local: Any = False,
    test: bool = False,
    context_dir: str = "",
    command: list[str] | None = None,
    master_url: str | None = None,
    *,
    mode: Any = None,
) -> Any:
    """Returns an `EstimatorNativeContext` (or submits the experiment and exits, see module doc)."""
    require_estimator("det.experimental.estimator")
    return _framework.native_init(
        _ESTIMATOR, config, local, test, context_dir, command, master_url, mode
    )


def local_config(config: dict | str | None) -> dict:
    """The expanded config of a local run (validated; no native command needed)."""
    return _framework.local_config(config, ESTIMATOR_DEFAULTS)


def _new_context(config: dict, hparams: dict, **ids: Any) -> Any:
    from determined.estimator._context import EstimatorNativeContext
    from determined.estimator._run import seed_everything, silence_tensorflow

    silence_tensorflow()
    context = EstimatorNativeContext(config, hparams, **ids)
    seed_everything(context.get_trial_seed())  # before the user builds the data and the estimator
    return context


def _train(core_context: Any, context: Any, *, mode: Any, latest_checkpoint: str | None) -> Any:
    from determined.estimator import _run
    from determined.estimator._loop import EstimatorSpecs

    specs = EstimatorSpecs(
        context.estimator, context.train_spec, context.eval_spec, context.serving_input_receiver_fns
    )
    return _run.train(core_context, context, specs, mode=mode, latest_checkpoint=latest_checkpoint)


def _print_summary(result: Any, *, test: bool, checkpoint_base: Any = None) -> None:
    from determined.estimator import _run

    _run.print_local_summary(result, test=test, checkpoint_base=checkpoint_base)


_ESTIMATOR = _framework.NativeFramework(
    api="det.experimental.estimator.init",
    starts_training="train_and_evaluate()",
    defaults=ESTIMATOR_DEFAULTS,
    new_context=_new_context,
    train=_train,
    # What tf.estimator.train_and_evaluate returns: (eval result, export results).
    fit_result=lambda result: (result.last_validation, []),
    print_summary=_print_summary,
    kind="estimator",
)


__all__ = [
    "ESTIMATOR_DEFAULTS",
    "INSTALL_HINT",
    "EstimatorUnavailable",
    "estimator_available",
    "init",
    "local_config",
]
