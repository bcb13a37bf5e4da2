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

The flow is `determined.experimental._framework.native_init`, shared with the Estimator; this
module gives it Keras' steps. It imports TensorFlow only when `init()` trains (trial or local),
never for submitting.
"""

from __future__ import annotations

import logging
import os
import pathlib
import sys
from typing import Any

from determined.experimental import _framework
from determined.experimental._native import NATIVE_DEFAULTS, build_native_config

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
    if local or getattr(mode, "name", mode) == "LOCAL" or os.environ.get("DET_TASK_TYPE"):
        _restart_for_keras2()
    return _framework.native_init(
        _KERAS, config, local, test, context_dir, command, master_url, mode
    )


def _restart_for_keras2() -> None:
    """Re-run this script with `TF_USE_LEGACY_KERAS=1` when it is Keras 2 code (a Native API
    script is: Determined's were written for Keras 2) and tf.keras is Keras 3 here.

    TensorFlow is imported by now, and it reads the variable only at import, so the script starts
    again from the top (it has done no more than its imports and argument parsing). The rule and
    the opt-out (`DET_KERAS_VERSION=3`) are `determined.common.keras_version`'s. Where this
    process cannot be started again as it was (a notebook, an embedding program) it says so."""
    from determined.common import keras_version

    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if not script:
        return
    added, line = keras_version.legacy_environment(os.environ, [pathlib.Path(script)])
    if not added:
        if line:
            logger.warning("%s", line)
        return
    argv = list(getattr(sys, "orig_argv", []))
    restartable = len(argv) >= 2 and (
        os.path.abspath(argv[1]) == os.path.abspath(script)
        or argv[1:3] == ["-m", "determined.exec.native"]
    )
    if not restartable:
        logger.warning(
            "%s: this script is Keras 2 code but tf.keras is Keras 3 in this process; start it "
            "with TF_USE_LEGACY_KERAS=1 in the environment",
            script,
        )
        return
    print(f"determined: {line}; starting the script again", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv[1:]], {**os.environ, **added})


def local_config(config: dict | str | None, defaults: dict) -> dict:
    """The expanded config of a local run (validated; no native command needed)."""
    return _framework.local_config(config, defaults)


def _new_context(config: dict, hparams: dict, **ids: Any) -> Any:
    import keras

    from determined.keras import _context

    context = _context.TFKerasNativeContext(config, hparams, **ids)
    # Seed before the user builds the model so initial weights follow the trial seed.
    keras.utils.set_random_seed(context.get_trial_seed())
    _context.activate_native_context(context)
    return context


def _train(core_context: Any, context: Any, *, mode: Any, latest_checkpoint: str | None) -> Any:
    # fit() trains once: the interception is already removed, so afterwards the model (and any
    # other) is plain Keras again.
    from determined.keras import _run

    return _run.train_native(core_context, context, mode=mode, latest_checkpoint=latest_checkpoint)


def _print_summary(result: Any, *, test: bool, checkpoint_base: Any = None) -> None:
    from determined.keras import _run

    _run.print_local_summary(result, test=test, checkpoint_base=checkpoint_base)


_KERAS = _framework.NativeFramework(
    api="det.experimental.keras.init",
    starts_training="model.fit()",
    defaults=KERAS_DEFAULTS,
    new_context=_new_context,
    train=_train,
    fit_result=lambda result: result.history(),  # what Keras' fit() returns
    print_summary=_print_summary,
    kind="keras",
)


__all__ = ["KERAS_DEFAULTS", "build_native_config", "init"]
