"""`det.experimental.create(trial_def, ...)`: submit, test or train a Trial class from a script."""

from __future__ import annotations

import logging
from typing import Any

import determined as det
from determined.experimental._mode import resolve_mode
from determined.experimental._native import (
    RunpyGlobals,
    StopLoadingImplementation,
    default_command,
    is_jupyter,
    submit_native,
    submit_notebook_and_stop,
)

logger = logging.getLogger("determined.experimental")


def _trial_kind(trial_def: Any) -> str:
    """ "pytorch", "keras" or "estimator", without importing a framework the class cannot be from."""
    if not isinstance(trial_def, type):
        raise TypeError(f"create(trial_def=...): expected a Trial class, got {trial_def!r}")
    names = {f"{base.__module__}.{base.__qualname__}" for base in trial_def.__mro__}
    if any(
        name.startswith("determined.pytorch.") and name.endswith(("PyTorchTrial", "LegacyTrial"))
        for name in names
    ):
        return "pytorch"
    if "determined.keras._trial.TFKerasTrial" in names:
        return "keras"
    if "determined.estimator._trial.EstimatorTrial" in names:
        return "estimator"
    raise TypeError(
        f"create(trial_def={trial_def.__name__}): not a det.pytorch.PyTorchTrial, det.keras.TFKerasTrial or "
        "det.estimator.EstimatorTrial subclass"
    )


def _run_trial(
    trial_def: Any,
    config: dict,
    hparams: dict | None,
    *,
    on_cluster: bool,
    test: bool,
    latest_checkpoint: str | None,
) -> Any:
    if _trial_kind(trial_def) == "pytorch":
        from determined.exec.harness import run_pytorch_trial

        return run_pytorch_trial(
            trial_def,
            config,
            hparams,
            latest_checkpoint=latest_checkpoint,
            on_cluster=on_cluster,
            test_mode=test,
        )
    if _trial_kind(trial_def) == "estimator":
        from determined.estimator._run import run_estimator_trial

        return run_estimator_trial(
            trial_def,
            config,
            hparams,
            latest_checkpoint=latest_checkpoint,
            on_cluster=on_cluster,
            test_mode=test,
        )
    from determined.keras._run import run_keras_trial

    return run_keras_trial(
        trial_def,
        config,
        hparams,
        latest_checkpoint=latest_checkpoint,
        on_cluster=on_cluster,
        test_mode=test,
    )


def create(
    trial_def: type,
    config: dict | str | None = None,
    local: Any = False,
    test: bool = False,
    context_dir: str = "",
    command: list[str] | None = None,
    master_url: str | None = None,
    *,
    mode: Any = None,
) -> int | None:
    """Submit a Trial class as an experiment (returns its id), or run it in this process.

    * `local=False`: packs `context_dir`, submits (a test experiment with `test=True`) and returns;
      the trial re-executes this script, which registers `trial_def` here and stops. In a
      notebook (no `command`) the whole notebook is submitted, its widget shown, and the cell
      stopped with one line (`jupyter_determined.notebook_submitted`), as
      `det.experimental.keras.init()` does;
    * `local=True, test=True`: one batch, validation and checkpoint in-process;
    * `local=True, test=False`: real training in-process for `searcher.max_length`.
    """
    local, test = resolve_mode(local, test, mode)
    kind = _trial_kind(trial_def)
    if kind == "estimator":
        from determined.estimator._availability import require_estimator

        require_estimator(f"det.experimental.create({trial_def.__name__})")
    runpy_globals = RunpyGlobals.get()
    info = det.get_cluster_info()
    if runpy_globals is not None or (info is not None and info.task_type == "TRIAL"):
        assert info is not None

        def train_in_trial() -> Any:
            return _run_trial(
                trial_def,
                info.trial._config,
                info.trial.hparams,
                on_cluster=True,
                test=False,
                latest_checkpoint=info.latest_checkpoint,
            )

        if runpy_globals is None:  # the script itself is the entrypoint: train right here
            train_in_trial()
            return None
        runpy_globals.register(train_in_trial, f"det.experimental.create({trial_def.__name__})")
        raise StopLoadingImplementation()
    if local:
        from determined.experimental._native import load_config

        loaded = load_config(config)
        if kind == "keras":
            from determined.experimental.keras import KERAS_DEFAULTS
            from determined.experimental.keras import local_config as keras_local_config

            loaded = {**KERAS_DEFAULTS, **loaded}
            keras_local_config(loaded, {})  # validate early, listing every problem
            hparams = None  # run_keras_trial samples them with the experiment seed
        elif kind == "estimator":
            from determined.experimental.estimator import local_config

            loaded = local_config(loaded)  # validate early, listing every problem
            hparams = None  # run_estimator_trial samples them with the experiment seed
        else:
            from determined.experimental._context import sample_hparams

            seed = (loaded.get("reproducibility") or {}).get("experiment_seed")
            hparams = sample_hparams(loaded.get("hyperparameters") or {}, seed)
            print(f"[local{' test' if test else ''}] hyperparameters: {hparams}", flush=True)
            if not logging.getLogger().handlers:  # the PyTorch harness reports through logging
                logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
        _run_trial(trial_def, loaded, hparams, on_cluster=False, test=test, latest_checkpoint=None)
        return None
    if not context_dir:
        raise ValueError(
            "det.experimental.create(context_dir=...): name the directory to upload with the script "
            "(e.g. context_dir='.'), or pass local=True to run in this process"
        )
    defaults = None
    if kind == "keras":
        from determined.experimental.keras import KERAS_DEFAULTS

        defaults = KERAS_DEFAULTS
    elif kind == "estimator":
        from determined.experimental.estimator import ESTIMATOR_DEFAULTS

        defaults = ESTIMATOR_DEFAULTS
    if not command and is_jupyter():
        # As keras.init() in a notebook: the widget appears, `last` is set, the cell stops.
        submit_notebook_and_stop(
            config, context_dir, master_url=master_url, test=test, defaults=defaults, api=kind
        )
    command = list(command) if command else default_command(context_dir)
    return submit_native(
        config, context_dir, command, master_url=master_url, test=test, defaults=defaults, api=kind
    )


def test_one_batch(trial_class: type, config: dict | str | None = None) -> None:
    """Determined 0.18's survivor of the Native API: train 1 batch, validate, checkpoint, in-process."""
    create(trial_class, config, local=True, test=True)


test_one_batch.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
