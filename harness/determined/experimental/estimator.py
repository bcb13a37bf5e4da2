"""`det.experimental.estimator.init()`: the Native API for tf.estimator — only where it still exists.

`tf.estimator` was removed in TensorFlow 2.16. With TensorFlow <= 2.15 and tensorflow-estimator
installed, `init()` gives an `EstimatorNativeContext`; otherwise it raises `EstimatorUnavailable`
saying how to get such an environment.
"""
from __future__ import annotations

import importlib.util
from typing import Any

from determined import errors

INSTALL_HINT = (
    "create a separate virtual environment for Estimator code: "
    "`python -m venv est-venv && est-venv/bin/pip install 'tensorflow-cpu==2.15.1' "
    "'tensorflow-estimator==2.15.*'` (numpy<2), then install this package into it; or port the model "
    "to Keras and use det.experimental.keras.init() / det.keras.TFKerasTrial"
)


class EstimatorUnavailable(errors.InvalidExperimentException):
    """tf.estimator cannot be imported in this environment."""


def estimator_available() -> tuple[bool, str]:
    """(available, reason) without importing TensorFlow when it is plainly absent."""
    if importlib.util.find_spec("tensorflow") is None:
        return False, "TensorFlow is not installed"
    import tensorflow as tf

    version = tf.__version__
    major_minor = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if major_minor >= (2, 16):
        return False, f"TensorFlow {version} is installed and tf.estimator was removed in TensorFlow 2.16"
    if importlib.util.find_spec("tensorflow_estimator") is None:
        return False, f"TensorFlow {version} is installed but tensorflow-estimator is not"
    return True, version


def _require_estimator() -> None:
    available, reason = estimator_available()
    if not available:
        raise EstimatorUnavailable(f"det.experimental.estimator needs tf.estimator: {reason}. To use it, {INSTALL_HINT}")


class EstimatorNativeContext:
    """Holds the estimator and specs given to `train_and_evaluate` (TensorFlow <= 2.15 only)."""

    def __init__(self, native_context: Any) -> None:
        self._native = native_context
        self.estimator = self.train_spec = self.eval_spec = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._native, name)

    def wrap_optimizer(self, optimizer: Any) -> Any:
        return optimizer

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        return dataset

    def train_and_evaluate(self, estimator: Any, train_spec: Any, eval_spec: Any) -> Any:
        import tensorflow as tf

        self.estimator, self.train_spec, self.eval_spec = estimator, train_spec, eval_spec
        # No managed loop for Estimators in this port: train and evaluate as TensorFlow would.
        return tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)


def init(
    config: dict | str | None = None,
    local: Any = False,
    test: bool = False,
    context_dir: str = "",
    command: list[str] | None = None,
    master_url: str | None = None,
    *,
    mode: Any = None,
) -> EstimatorNativeContext:
    """Native API entry point for Estimators; raises EstimatorUnavailable on TensorFlow >= 2.16."""
    _require_estimator()
    from determined.experimental._context import NativeContext, TrialContextBase
    from determined.experimental._mode import resolve_mode

    local, test = resolve_mode(local, test, mode)
    if not local:
        raise NotImplementedError(
            "det.experimental.estimator.init(local=False): submitting Estimator code is not supported by "
            "this port; run it with local=True, or port the model to Keras"
        )
    native = NativeContext.__new__(NativeContext)
    base = TrialContextBase.from_config(config if isinstance(config, dict) else {})
    native.__dict__.update(base.__dict__)
    native._train_fn = None
    return EstimatorNativeContext(native)
