"""What the Keras and Estimator integrations share, written once.

Both run the same way; only the framework's own steps differ (building the context, turning a
Trial or the Native API's arguments into a managed loop, what `fit()` returns). This module owns
the common flow and takes those steps as arguments:

* `run_trial_class(...)`: a Trial class on the master (Core API from `det.core.init()`) or off it
  (expanded config, sampled hyperparameters, `local_core_context`, the local summary) —
  `run_keras_trial` and `run_estimator_trial` are this plus their framework's check;
* `new_trial_context(...)`, `loop_arguments(...)`: a Trial context with the process's distributed
  info, and the managed loop's keyword arguments that do not depend on the framework;
* `NativeFramework` + `native_init(...)`: `det.experimental.keras.init()` and
  `det.experimental.estimator.init()` — submit and exit, train in a trial (re-executed by
  `determined.exec.native` or as a plain entrypoint), or train locally in-process.

Framework-free: nothing here imports TensorFlow; the callables passed in do.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import determined as det
from determined import _loop as loop_core
from determined._loop import LoopMode, LoopResult
from determined.experimental._local import local_core_context
from determined.experimental._mode import resolve_mode
from determined.experimental._native import (
    RunpyGlobals,
    StopLoadingImplementation,
    load_config,
    submit_and_exit,
)


def silence_tensorflow() -> None:
    """TF's C++ start-up chatter drowns the trial's logs; set before TensorFlow is imported."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def checkpoint_base(core_context: Any) -> Any:
    """Where a local run's checkpoints are (the dummy storage manager's base path), if known
    (None for a bucket: its base path is only a scratch directory)."""
    manager = getattr(core_context.checkpoint, "_storage_manager", None)
    if manager is None or not getattr(manager, "is_local", True):
        return None
    return getattr(manager, "base_path", None)


# ---------------------------------------------------------------------------------------------
# Trial classes


def new_trial_context(
    context_class: type,
    core_context: Any,
    *,
    config: dict,
    hparams: dict,
    trial_seed: int,
    trial_id: int | None,
    experiment_id: int | None,
) -> Any:
    """A Trial context (`TFKerasTrialContext`, `EstimatorTrialContext`) for this process."""
    from determined.experimental._context import DistributedInfo

    distributed = (
        DistributedInfo.from_core(core_context.distributed) if core_context is not None else None
    )
    return context_class(
        config,
        hparams,
        trial_seed=trial_seed,
        trial_id=trial_id,
        experiment_id=experiment_id,
        distributed=distributed,
        core_context=core_context,
    )


def loop_arguments(context: Any, *, mode: LoopMode, latest_checkpoint: str | None) -> dict:
    """The managed loop's keyword arguments every framework passes alike.

    Local runs print each validation as it happens; trials report to the master instead.
    """
    return {
        "config": context.get_experiment_config(),
        "global_batch_size": context.get_global_batch_size(),
        "mode": mode,
        "latest_checkpoint": latest_checkpoint,
        "stop_requested": context.get_stop_requested,
        "on_report": loop_core.print_validation if mode is not LoopMode.CLUSTER else None,
    }


# Each framework's LoopResult subclass (Keras' adds history()) comes back as that subclass.
ResultT = TypeVar("ResultT", bound=LoopResult)


class PrintSummary(Protocol):
    """A framework's `print_local_summary`."""

    def __call__(self, result: Any, *, test: bool, checkpoint_base: Any = None) -> None: ...


def run_trial_class(
    train_trial_class: Callable[..., ResultT],
    print_summary: PrintSummary,
    trial_class: type,
    config: dict,
    hparams: dict | None,
    *,
    latest_checkpoint: str | None,
    on_cluster: bool,
    test_mode: bool,
) -> ResultT:
    """Train a Trial class the way `determined.exec.harness.run_pytorch_trial` runs a PyTorchTrial.

    On the master: searcher operations, metrics and checkpoints through `det.core.init()`.
    Off it: real local training for `searcher.max_length` (or one batch with `test_mode`), the
    hyperparameters sampled with the experiment seed unless given, and a summary printed.

    `train_trial_class` is the framework's (`determined.keras._run.train_trial_class`): it takes
    `(trial_class, core_context, *, config, hparams, trial_seed, mode, trial_id=None,
    experiment_id=None, latest_checkpoint=None)`.
    """
    from determined import core

    if on_cluster:
        info = det.get_cluster_info()
        assert info is not None
        trial = info.trial
        with core.init() as core_context:
            return train_trial_class(
                trial_class,
                core_context,
                config=config,
                hparams=dict(hparams or trial.hparams),
                trial_seed=trial.trial_seed,
                mode=LoopMode.CLUSTER,
                trial_id=trial.trial_id,
                experiment_id=trial.experiment_id,
                latest_checkpoint=latest_checkpoint,
            )
    from determined.common import expconf

    expanded = expconf.apply_defaults(config)
    seed = int(expanded["reproducibility"]["experiment_seed"])
    if hparams is None:
        from determined.experimental._context import sample_hparams

        hparams = sample_hparams(config.get("hyperparameters") or {}, seed)
    print(f"[local{' test' if test_mode else ''}] hyperparameters: {hparams}", flush=True)
    with local_core_context(expanded, test=test_mode) as core_context:
        result = train_trial_class(
            trial_class,
            core_context,
            config=expanded,
            hparams=hparams,
            trial_seed=seed,
            mode=LoopMode.TEST if test_mode else LoopMode.LOCAL,
            latest_checkpoint=latest_checkpoint,
        )
        base = checkpoint_base(core_context)
    # A test run's checkpoints were in a temporary directory, gone by now.
    print_summary(result, test=test_mode, checkpoint_base=None if test_mode else base)
    return result


# ---------------------------------------------------------------------------------------------
# the Native API: det.experimental.<framework>.init()


@dataclasses.dataclass(frozen=True)
class NativeFramework:
    """One framework's part of `det.experimental.<framework>.init()`.

    Attributes:
        api: the entry point's name in messages (`"det.experimental.keras.init"`).
        starts_training: the call that starts training (`"model.fit()"`), in messages.
        defaults: the config keys a native experiment gets unless the user's config sets them.
        new_context: `(config, hparams, *, trial_seed, trial_id=None, experiment_id=None)` ->
            the Native context, seeded and ready for the user's script.
        train: `(core_context, context, *, mode, latest_checkpoint)` -> the loop's result, once
            the script has handed over what to train.
        fit_result: what the training call returns to the script, from the loop's result.
        print_summary: the framework's `print_local_summary`.
    """

    api: str
    starts_training: str
    defaults: dict
    new_context: Callable[..., Any]
    train: Callable[..., LoopResult]
    fit_result: Callable[[Any], Any]
    print_summary: PrintSummary
    kind: str | None = None  # its `internal.native.api` ("keras", "estimator")


def native_init(
    framework: NativeFramework,
    config: dict | str | None,
    local: Any,
    test: bool,
    context_dir: str,
    command: list[str] | None,
    master_url: str | None,
    mode: Any,
) -> Any:
    """The body of `det.experimental.<framework>.init()` (its arguments, see that function)."""
    local, test = resolve_mode(local, test, mode)
    runpy_globals = RunpyGlobals.get()
    if runpy_globals is not None:
        return _trial_context(framework, runpy_globals)
    info = det.get_cluster_info()
    if info is not None and info.task_type == "TRIAL":
        return _direct_trial_context(framework)
    if local:
        return _local_context(framework, config, test=test)
    submit_and_exit(
        framework.api,
        config,
        context_dir,
        command,
        master_url=master_url,
        test=test,
        defaults=framework.defaults,
        kind=framework.kind,
    )


def local_config(config: dict | str | None, defaults: dict) -> dict:
    """The expanded config of a local run (validated; no native command needed)."""
    from determined.common import expconf

    merged = {**copy.deepcopy(defaults), **load_config(config)}
    expconf.check(merged)
    return expconf.apply_defaults(merged)


def _cluster_context(framework: NativeFramework) -> tuple[Any, Callable[[], Any]]:
    """This trial's Native context, and the function that trains it under `det.core.init()`."""
    info = det.get_cluster_info()
    if info is None:
        raise RuntimeError(
            "determined.exec.native runs only inside a trial (no DET_* environment found)"
        )
    trial = info.trial
    context = framework.new_context(
        trial._config,
        trial.hparams,
        trial_seed=trial.trial_seed,
        trial_id=trial.trial_id,
        experiment_id=trial.experiment_id,
    )

    def train_in_trial() -> Any:
        with det.core.init() as core_context:
            result = framework.train(
                core_context,
                context,
                mode=LoopMode.CLUSTER,
                latest_checkpoint=info.latest_checkpoint,
            )
        return framework.fit_result(result)

    return context, train_in_trial


def _trial_context(framework: NativeFramework, runpy_globals: RunpyGlobals) -> Any:
    """Re-executed by determined.exec.native: register the training where the script starts it,
    and stop the script there (the runner trains once the script is unwound)."""
    context, train_in_trial = _cluster_context(framework)

    def at_training_call() -> Any:
        runpy_globals.register(train_in_trial, f"{framework.api}() + {framework.starts_training}")
        raise StopLoadingImplementation()

    context._set_train_fn(at_training_call)
    return context


def _direct_trial_context(framework: NativeFramework) -> Any:
    """A native script run as a plain entrypoint (`python3 train.py`) in a trial: train in place."""
    context, train_in_trial = _cluster_context(framework)
    context._set_train_fn(train_in_trial)
    return context


def _local_context(framework: NativeFramework, config: dict | str | None, *, test: bool) -> Any:
    from determined.experimental._context import sample_hparams

    expanded = local_config(config, framework.defaults)
    seed = int(expanded["reproducibility"]["experiment_seed"])
    hparams = sample_hparams(load_config(config).get("hyperparameters") or {}, seed)
    print(f"[local{' test' if test else ''}] hyperparameters: {hparams}", flush=True)
    context = framework.new_context(expanded, hparams, trial_seed=seed)

    def train_locally() -> Any:
        mode = LoopMode.TEST if test else LoopMode.LOCAL
        with local_core_context(expanded, test=test) as core_context:
            result = framework.train(core_context, context, mode=mode, latest_checkpoint=None)
            base = checkpoint_base(core_context)
        framework.print_summary(result, test=test, checkpoint_base=None if test else base)
        return framework.fit_result(result)

    context._set_train_fn(train_locally)
    return context
