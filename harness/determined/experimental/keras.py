"""`det.experimental.keras.init()`: the Native API for Keras (Determined 0.12.5-0.15 form).

    context = det.experimental.keras.init(config, context_dir=".")
    model = context.wrap_model(build_model(context.get_hparam("hidden")))
    model.compile(optimizer=..., loss=..., metrics=["accuracy"])
    model.fit(x, y, validation_data=(x_val, y_val))

* user environment, `local=False`: submits the script as an experiment and exits (status 0);
* `local=True, test=True`: `fit()` runs one batch, a validation and a checkpoint in-process;
* `local=True, test=False`: `fit()` trains for real in-process, for `searcher.max_length`;
* inside a trial (re-executed by `determined.exec.native`): `init()` returns this trial's
  context and `fit()` hands over to the managed loop (searcher lengths, checkpoints, preemption).

This module imports TensorFlow only when `init()` trains (trial or local), never for submitting.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import determined as det
from determined.experimental._mode import resolve_mode
from determined.experimental._native import (
    NATIVE_DEFAULTS,
    RunpyGlobals,
    StopLoadingImplementation,
    build_native_config,
    load_config,
    submit_and_exit,
)

logger = logging.getLogger("determined.experimental")

# Keras validation metrics are Keras' names prefixed with "val_"; val_loss always exists.
KERAS_DEFAULTS: dict = {
    **NATIVE_DEFAULTS,
    "searcher": {
        "name": "single",
        "metric": "val_loss",
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
    """Returns a `TFKerasNativeContext` (or submits the experiment and exits, see module doc).

    `mode=det.experimental.Mode.CLUSTER/LOCAL` (Determined 0.12.3) is accepted, also as the
    second positional argument: LOCAL means `local=True, test=True`.
    """
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
        "det.experimental.keras.init",
        config,
        context_dir,
        command,
        master_url=master_url,
        test=test,
        defaults=KERAS_DEFAULTS,
    )


def _new_context(config: dict, hparams: dict, **ids: Any) -> Any:
    import keras

    from determined import keras as det_keras

    context = det_keras.TFKerasNativeContext(config, hparams, **ids)
    # Seed before the user builds the model so initial weights follow the trial seed.
    keras.utils.set_random_seed(context.get_trial_seed())
    det_keras.activate_native_context(context)
    return context


def _trial_ids(info: Any) -> dict:
    trial = info.trial
    return {
        "trial_seed": trial.trial_seed,
        "trial_id": trial.trial_id,
        "experiment_id": trial.experiment_id,
    }


def _trial_context(runpy_globals: RunpyGlobals) -> Any:
    """Re-executed by determined.exec.native: register training at fit() and stop the script there."""
    from determined import keras as det_keras

    info = det.get_cluster_info()
    if info is None:
        raise RuntimeError(
            "determined.exec.native runs only inside a trial (no DET_* environment found)"
        )
    context = _new_context(info.trial._config, info.trial.hparams, **_trial_ids(info))

    def train_in_trial() -> Any:
        with det.core.init() as core_context:
            return det_keras.train_native(
                core_context,
                context,
                mode=det_keras.LoopMode.CLUSTER,
                latest_checkpoint=info.latest_checkpoint,
            )

    def at_fit() -> Any:
        runpy_globals.register(train_in_trial, "det.experimental.keras.init() + model.fit()")
        raise StopLoadingImplementation()

    context._set_train_fn(at_fit)
    return context


def _direct_trial_context() -> Any:
    """A native script run as a plain entrypoint (`python3 train.py`) in a trial: train inside fit()."""
    from determined import keras as det_keras

    info = det.get_cluster_info()
    assert info is not None
    context = _new_context(info.trial._config, info.trial.hparams, **_trial_ids(info))

    def train_now() -> Any:
        with det.core.init() as core_context:
            result = det_keras.train_native(
                core_context,
                context,
                mode=det_keras.LoopMode.CLUSTER,
                latest_checkpoint=info.latest_checkpoint,
            )
        return result.history()

    context._set_train_fn(train_now)
    return context


def local_config(config: dict | str | None, defaults: dict) -> dict:
    """The expanded config of a local run (validated; no native command needed)."""
    from determined.common import expconf

    user = load_config(config)
    merged = {**copy.deepcopy(defaults), **user}
    expconf.check(merged)
    return expconf.apply_defaults(merged)


def _local_context(config: dict | str | None, *, test: bool) -> Any:
    from determined import keras as det_keras
    from determined.experimental._context import sample_hparams
    from determined.keras import _run

    expanded = local_config(config, KERAS_DEFAULTS)
    seed = int(expanded["reproducibility"]["experiment_seed"])
    hparams = sample_hparams(load_config(config).get("hyperparameters") or {}, seed)
    print(f"[local{' test' if test else ''}] hyperparameters: {hparams}", flush=True)
    context = _new_context(expanded, hparams, trial_seed=seed)

    def train_locally() -> Any:
        # fit() trains once: the interception is already removed, so afterwards the model (and
        # any other) is plain Keras again.
        with _run.local_core_context(expanded, test=test) as core_context:
            result = det_keras.train_native(
                core_context,
                context,
                mode=det_keras.LoopMode.TEST if test else det_keras.LoopMode.LOCAL,
            )
            base = getattr(
                getattr(core_context.checkpoint, "_storage_manager", None), "base_path", None
            )
        _run.print_local_summary(result, test=test, checkpoint_base=None if test else base)
        return result.history()

    context._set_train_fn(train_locally)
    return context


__all__ = ["KERAS_DEFAULTS", "build_native_config", "init"]
