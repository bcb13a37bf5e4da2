"""Keras under Determined: `TFKerasTrial`, the Keras contexts, the managed training loop, and
the names Determined's `determined.keras` exported (0.13-0.38).

This is the only part of `determined` that imports TensorFlow/Keras. Models may be Keras 3
(`keras`, also `tf.keras` by default) or Keras 2 (`tf_keras`, what `tf.keras` is under
`TF_USE_LEGACY_KERAS=1`); the callbacks and adapters here derive from what `tf.keras` is.
"""

import os as _os
import warnings
from typing import Any

# Set before TensorFlow loads (a user who set them keeps their values).
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from determined.keras import callbacks  # noqa: E402
from determined.keras._adapters import (  # noqa: E402
    ArrayLike,
    InputData,
    SequenceAdapter,
    _ArrayLikeAdapter,
)
from determined.keras._callback import DeterminedCallback, TensorBoard  # noqa: E402
from determined.keras._context import (  # noqa: E402
    FitArguments,
    TFKerasContext,
    TFKerasExperimentalContext,
    TFKerasNativeContext,
    TFKerasTrainConfig,
    TFKerasTrialContext,
    activate_native_context,
)
from determined.keras._load import (  # noqa: E402
    get_rng_state,
    load_model_from_checkpoint_path,
    set_rng_state,
)
from determined.keras._loop import LoopMode, LoopResult, ManagedLoop, Report, format_table  # noqa: E402
from determined.keras._run import run_keras_trial, train_native, train_trial_class  # noqa: E402
from determined.keras._trial import TFKerasTrial  # noqa: E402


class TFKerasTensorBoard(callbacks.TensorBoard):
    """Deprecated name (Determined 0.13-0.38) of `det.keras.callbacks.TensorBoard`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            "det.keras.TFKerasTensorBoard is a deprecated name for "
            "det.keras.callbacks.TensorBoard, please update your code.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(*args, **kwargs)


__all__ = [
    "ArrayLike",
    "DeterminedCallback",
    "FitArguments",
    "InputData",
    "SequenceAdapter",
    "TFKerasContext",
    "TFKerasExperimentalContext",
    "TFKerasTensorBoard",
    "TFKerasTrainConfig",
    "TensorBoard",
    "_ArrayLikeAdapter",
    "callbacks",
    "get_rng_state",
    "load_model_from_checkpoint_path",
    "set_rng_state",
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
