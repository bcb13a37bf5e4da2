"""tf.estimator under Determined: `EstimatorTrial`, the Estimator contexts, metric reducers,
`RunHook` and checkpoint loading, with the names Determined's `determined.estimator` exported
(0.13-0.24) and nothing else.

Importing this package never imports TensorFlow: it is loaded when an Estimator trains (and by
`RunHook`, a `tf.estimator.SessionRunHook` subclass created when first used). Training needs
TensorFlow <= 2.15 with tensorflow-estimator (`tf.estimator` was removed in 2.16); elsewhere it
raises `EstimatorUnavailable` (`determined.estimator._availability`), saying what to install.

Estimators may be `tf.estimator.Estimator`s or v1 ones (`tf.compat.v1.estimator.DNNClassifier`, ...).

The managed loop, its entry points and the availability checks are this project's own, in private
modules (`determined.estimator._loop`, `._run`, `._availability`, `._reducer`). The names this
package used to export for them (`EstimatorLoop`, `run_estimator_trial`, `EstimatorUnavailable`,
`make_metric`, ...) still resolve here for older scripts, but are not part of the namespace or
`__all__`.
"""

from __future__ import annotations

import importlib
from typing import Any

from determined.estimator._context import (
    EstimatorContext,
    EstimatorExperimentalContext,
    EstimatorNativeContext,
    EstimatorTrialContext,
    ServingInputReceiverFn,
)
from determined.estimator._load import load_estimator_from_checkpoint_path
from determined.estimator._reducer import MetricReducer
from determined.estimator._trial import EstimatorTrial

# Names whose module imports TensorFlow: loaded the first time they are used.
_LAZY = {"RunHook": "determined.estimator._callback"}

# This project's names that the package exported before it kept to Determined's: where they live.
_PRIVATE_ALIASES = {
    "INSTALL_HINT": "determined.estimator._availability",
    "EstimatorUnavailable": "determined.estimator._availability",
    "estimator_available": "determined.estimator._availability",
    "estimator_classes": "determined.estimator._availability",
    "is_estimator": "determined.estimator._availability",
    "require_estimator": "determined.estimator._availability",
    "EstimatorLoop": "determined.estimator._loop",
    "EstimatorSpecs": "determined.estimator._loop",
    "LoopMode": "determined.estimator._loop",
    "LoopResult": "determined.estimator._loop",
    "Report": "determined.estimator._loop",
    "format_table": "determined.estimator._loop",
    "make_metric": "determined.estimator._reducer",
    "run_estimator_trial": "determined.estimator._run",
    "train": "determined.estimator._run",
    "train_trial_class": "determined.estimator._run",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _PRIVATE_ALIASES:
        # Resolved on each access rather than stored, so they stay out of the namespace.
        return getattr(importlib.import_module(_PRIVATE_ALIASES[name]), name)
    raise AttributeError(f"module 'determined.estimator' has no attribute {name!r}")


__all__ = [
    "EstimatorContext",
    "EstimatorExperimentalContext",
    "EstimatorNativeContext",
    "EstimatorTrial",
    "EstimatorTrialContext",
    "MetricReducer",
    "RunHook",
    "ServingInputReceiverFn",
    "load_estimator_from_checkpoint_path",
]
