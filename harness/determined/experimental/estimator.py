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

`tf.estimator` exists only up to TensorFlow 2.15 (with tensorflow-estimator). Elsewhere every
mode raises `EstimatorUnavailable`, naming the installed TensorFlow and what to install.
TensorFlow is imported by the availability check only when it is installed.
"""

from __future__ import annotations

import copy
from typing import Any

import determined as det
from determined.estimator._availability import (
    INSTALL_HINT,
    EstimatorUnavailable,
    estimator_available,
    require_estimator,
)
from determined.experimental._mode import resolve_mode
from determined.experimental._native import (
    NATIVE_DEFAULTS,
    RunpyGlobals,
    StopLoadingImplementation,
    load_config,
    submit_and_exit,
)

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
    local, test = resolve_mode(local, test, mode)
    runpy_globals = RunpyGlobals.get()
    if runpy_globals is not None:
        return _trial_context(runpy_globals)
    info = det.get_cluster_info()
    if info is not None and info.task_type == "TRIAL":
        return _direct_trial_context()
    if local:
        return _local_context(config, test=test)
    submit_and_exit(
        "det.experimental.estimator.init",
        config,
        context_dir,
        command,
        master_url=master_url,
        test=test,
        defaults=ESTIMATOR_DEFAULTS,
    )


def _new_context(config: dict, hparams: dict, **ids: Any) -> Any:
    from determined import estimator as det_estimator
    from determined.estimator._run import seed_everything, silence_tensorflow

    silence_tensorflow()
    context = det_estimator.EstimatorNativeContext(config, hparams, **ids)
    seed_everything(context.get_trial_seed())  # before the user builds the data and the estimator
    return context


def _specs(context: Any) -> Any:
    from determined.estimator import EstimatorSpecs

    return EstimatorSpecs(
        context.estimator, context.train_spec, context.eval_spec, context.serving_input_receiver_fns
    )


def _trial_ids(info: Any) -> dict:
    trial = info.trial
    return {
        "trial_seed": trial.trial_seed,
        "trial_id": trial.trial_id,
        "experiment_id": trial.experiment_id,
    }


def _train_in_trial(context: Any, info: Any) -> Any:
    from determined import estimator as det_estimator

    with det.core.init() as core_context:
        result = det_estimator.train(
            core_context,
            context,
            _specs(context),
            mode=det_estimator.LoopMode.CLUSTER,
            latest_checkpoint=info.latest_checkpoint,
        )
    return result.last_validation, []


def _trial_context(runpy_globals: RunpyGlobals) -> Any:
    """Re-executed by determined.exec.native: register training at train_and_evaluate() and stop there."""
    info = det.get_cluster_info()
    if info is None:
        raise RuntimeError(
            "determined.exec.native runs only inside a trial (no DET_* environment found)"
        )
    context = _new_context(info.trial._config, info.trial.hparams, **_trial_ids(info))

    def at_train_and_evaluate() -> Any:
        runpy_globals.register(
            lambda: _train_in_trial(context, info),
            "det.experimental.estimator.init() + train_and_evaluate()",
        )
        raise StopLoadingImplementation()

    context._set_train_fn(at_train_and_evaluate)
    return context


def _direct_trial_context() -> Any:
    """A native script run as a plain entrypoint (`python3 train.py`) in a trial: train in place."""
    info = det.get_cluster_info()
    assert info is not None
    context = _new_context(info.trial._config, info.trial.hparams, **_trial_ids(info))
    context._set_train_fn(lambda: _train_in_trial(context, info))
    return context


def local_config(config: dict | str | None) -> dict:
    """The expanded config of a local run (validated; no native command needed)."""
    from determined.common import expconf

    merged = {**copy.deepcopy(ESTIMATOR_DEFAULTS), **load_config(config)}
    expconf.check(merged)
    return expconf.apply_defaults(merged)


def _local_context(config: dict | str | None, *, test: bool) -> Any:
    from determined import estimator as det_estimator
    from determined.estimator import _run
    from determined.experimental._context import sample_hparams

    expanded = local_config(config)
    seed = int(expanded["reproducibility"]["experiment_seed"])
    hparams = sample_hparams(load_config(config).get("hyperparameters") or {}, seed)
    print(f"[local{' test' if test else ''}] hyperparameters: {hparams}", flush=True)
    context = _new_context(expanded, hparams, trial_seed=seed)

    def train_locally() -> Any:
        mode = det_estimator.LoopMode.TEST if test else det_estimator.LoopMode.LOCAL
        with _run.local_core_context(expanded, test=test) as core_context:
            result = det_estimator.train(core_context, context, _specs(context), mode=mode)
            base = getattr(
                getattr(core_context.checkpoint, "_storage_manager", None), "base_path", None
            )
        _run.print_local_summary(result, test=test, checkpoint_base=None if test else base)
        return result.last_validation, []

    context._set_train_fn(train_locally)
    return context


__all__ = [
    "ESTIMATOR_DEFAULTS",
    "INSTALL_HINT",
    "EstimatorUnavailable",
    "estimator_available",
    "init",
    "local_config",
]
