"""Keras under Determined: `TFKerasTrial`, the Keras contexts, and the managed training loop.

This is the only part of `determined` that imports TensorFlow/Keras (Keras 3; `tf.keras` is
the same library).
"""

import os as _os

# Set before TensorFlow loads (a user who set them keeps their values).
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from determined.keras._callback import DeterminedCallback  # noqa: E402
from determined.keras._context import (  # noqa: E402
    FitArguments,
    TFKerasNativeContext,
    TFKerasTrialContext,
    activate_native_context,
)
from determined.keras._loop import LoopMode, LoopResult, ManagedLoop, Report, format_table  # noqa: E402
from determined.keras._run import run_keras_trial, train_native, train_trial_class  # noqa: E402
from determined.keras._trial import TFKerasTrial  # noqa: E402

__all__ = [
    "DeterminedCallback",
    "FitArguments",
    "LoopMode",
    "LoopResult",
    "ManagedLoop",
    "Report",
    "TFKerasNativeContext",
    "TFKerasTrial",
    "TFKerasTrialContext",
    "activate_native_context",
    "format_table",
    "run_keras_trial",
    "train_native",
    "train_trial_class",
]
