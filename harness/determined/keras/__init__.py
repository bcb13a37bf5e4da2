"""Keras under Determined: `TFKerasTrial`, the Keras contexts, callbacks and checkpoint loading,
with the names Determined's `determined.keras` exported (0.13-0.38) and nothing else.

This is the only part of `determined` that imports TensorFlow/Keras. Models may be Keras 3
(`keras`, also `tf.keras` by default) or Keras 2 (`tf_keras`, what `tf.keras` is under
`TF_USE_LEGACY_KERAS=1`); the callbacks and adapters here derive from what `tf.keras` is.

The managed loop and its entry points are this project's own, in private modules
(`determined.keras._loop`, `._run`, `._context`). The names this package used to export for them
(`ManagedLoop`, `LoopMode`, `run_keras_trial`, ...) still resolve here for older scripts, but are
not part of the namespace or `__all__`.
"""

import importlib as _importlib
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
    _adapt_data_from_data_loader,
    _adapt_data_from_fit_args,
    _ArrayLikeAdapter,
)
from determined.keras._callback import DeterminedCallback, TensorBoard  # noqa: E402
from determined.keras._context import (  # noqa: E402
    TFKerasContext,
    TFKerasExperimentalContext,
    TFKerasNativeContext,
    TFKerasTrainConfig,
    TFKerasTrialContext,
)
from determined.keras._load import (  # noqa: E402
    get_rng_state,
    load_model_from_checkpoint_path,
    set_rng_state,
)
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


# This project's names that the package exported before it kept to Determined's: where they live.
_PRIVATE_ALIASES = {
    "FitArguments": "determined.keras._context",
    "activate_native_context": "determined.keras._context",
    "LoopMode": "determined.keras._loop",
    "LoopResult": "determined.keras._loop",
    "ManagedLoop": "determined.keras._loop",
    "Report": "determined.keras._loop",
    "format_table": "determined.keras._loop",
    "run_keras_trial": "determined.keras._run",
    "train_native": "determined.keras._run",
    "train_trial_class": "determined.keras._run",
}


def __getattr__(name: str) -> Any:
    # Resolved on each access rather than stored, so they stay out of the namespace.
    if name in _PRIVATE_ALIASES:
        return getattr(_importlib.import_module(_PRIVATE_ALIASES[name]), name)
    raise AttributeError(f"module 'determined.keras' has no attribute {name!r}")


__all__ = [
    "ArrayLike",
    "DeterminedCallback",
    "InputData",
    "SequenceAdapter",
    "TFKerasContext",
    "TFKerasExperimentalContext",
    "TFKerasNativeContext",
    "TFKerasTensorBoard",
    "TFKerasTrainConfig",
    "TFKerasTrial",
    "TFKerasTrialContext",
    "TensorBoard",
    "_ArrayLikeAdapter",
    "_adapt_data_from_data_loader",
    "_adapt_data_from_fit_args",
    "callbacks",
    "get_rng_state",
    "load_model_from_checkpoint_path",
    "set_rng_state",
]
