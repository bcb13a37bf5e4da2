"""tf.estimator under Determined: `EstimatorTrial`, the Estimator contexts and the managed loop.

Importing this package never imports TensorFlow: it is loaded when an Estimator trains (and by
`RunHook`, a `tf.estimator.SessionRunHook` subclass created when first used). Training needs
TensorFlow <= 2.15 with tensorflow-estimator (`tf.estimator` was removed in 2.16); elsewhere it
raises `EstimatorUnavailable`, saying what to install.

Estimators may be `tf.estimator.Estimator`s or v1 ones (`tf.compat.v1.estimator.DNNClassifier`, ...).
"""

from __future__ import annotations

import importlib
from typing import Any

from determined.estimator._availability import (
    INSTALL_HINT,
    EstimatorUnavailable,
    estimator_available,
    estimator_classes,
    is_estimator,
    require_estimator,
)
from determined.estimator._context import (
    EstimatorContext,
    EstimatorExperimentalContext,
    EstimatorNativeContext,
    EstimatorTrialContext,
    ServingInputReceiverFn,
)
from determined.estimator._load import load_estimator_from_checkpoint_path
from determined.estimator._loop import (
    EstimatorLoop,
    EstimatorSpecs,
    LoopMode,
    LoopResult,
    Report,
    format_table,
)
from determined.estimator._reducer import MetricReducer, make_metric
from determined.estimator._run import (
    run_estimator_trial,
    train,
    train_trial_class,
)
from determined.estimator._trial import EstimatorTrial

# Names whose module imports TensorFlow: loaded the first time they are used.
_LAZY = {"RunHook": "determined.estimator._callback"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'determined.estimator' has no attribute {name!r}")


__all__ = [
    "INSTALL_HINT",
    "EstimatorContext",
    "EstimatorExperimentalContext",
    "EstimatorLoop",
    "EstimatorNativeContext",
    "EstimatorSpecs",
    "EstimatorTrial",
    "EstimatorTrialContext",
    "EstimatorUnavailable",
    "LoopMode",
    "LoopResult",
    "MetricReducer",
    "Report",
    "RunHook",
    "ServingInputReceiverFn",
    "estimator_available",
    "estimator_classes",
    "format_table",
    "is_estimator",
    "load_estimator_from_checkpoint_path",
    "make_metric",
    "require_estimator",
    "run_estimator_trial",
    "train",
    "train_trial_class",
]
