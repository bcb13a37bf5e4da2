"""tf.estimator under Determined: `EstimatorTrial`, the Estimator contexts and the managed loop.

Importing this package never imports TensorFlow: it is loaded when an Estimator trains. Training
needs TensorFlow <= 2.15 with tensorflow-estimator (`tf.estimator` was removed in 2.16); elsewhere
it raises `EstimatorUnavailable`, saying what to install.
"""

from determined.estimator._availability import (
    INSTALL_HINT,
    EstimatorUnavailable,
    estimator_available,
    require_estimator,
)
from determined.estimator._context import EstimatorNativeContext, EstimatorTrialContext
from determined.estimator._loop import (
    EstimatorLoop,
    EstimatorSpecs,
    LoopMode,
    LoopResult,
    Report,
    format_table,
)
from determined.estimator._run import (
    run_estimator_trial,
    train,
    train_trial_class,
)
from determined.estimator._trial import EstimatorTrial

__all__ = [
    "INSTALL_HINT",
    "EstimatorLoop",
    "EstimatorNativeContext",
    "EstimatorSpecs",
    "EstimatorTrial",
    "EstimatorTrialContext",
    "EstimatorUnavailable",
    "LoopMode",
    "LoopResult",
    "Report",
    "estimator_available",
    "format_table",
    "require_estimator",
    "run_estimator_trial",
    "train",
    "train_trial_class",
]
