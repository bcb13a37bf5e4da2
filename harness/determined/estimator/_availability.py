"""Whether `tf.estimator` can be used here, answered without importing TensorFlow when it is absent.

`tf.estimator` was removed in TensorFlow 2.16; the last stack with it is `tensorflow-cpu==2.15.1`
+ `tensorflow-estimator==2.15.*` (numpy < 2), which lives in its own virtual environment.
"""

from __future__ import annotations

import importlib.util

from determined import errors

INSTALL_HINT = (
    "create a separate virtual environment for Estimator code: "
    "`python3.11 -m venv est-venv && est-venv/bin/pip install 'tensorflow-cpu==2.15.1' "
    "'tensorflow-estimator==2.15.*' 'numpy<2'`, then install this package into it (in this repository, "
    "`make .venv-tf215/.installed` builds one); or port the model to Keras and use "
    "det.experimental.keras.init() / det.keras.TFKerasTrial"
)


class EstimatorUnavailable(errors.InvalidExperimentException):
    """tf.estimator cannot be imported in this environment."""


def estimator_available() -> tuple[bool, str]:
    """(available, reason or the TensorFlow version) without importing TensorFlow when it is plainly absent."""
    if importlib.util.find_spec("tensorflow") is None:
        return False, "TensorFlow is not installed"
    import tensorflow as tf

    version = tf.__version__
    major_minor = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if major_minor >= (2, 16):
        return (
            False,
            f"TensorFlow {version} is installed and tf.estimator was removed in TensorFlow 2.16",
        )
    if importlib.util.find_spec("tensorflow_estimator") is None:
        return False, f"TensorFlow {version} is installed but tensorflow-estimator is not"
    return True, version


def require_estimator(where: str = "det.experimental.estimator") -> None:
    """Raise `EstimatorUnavailable`, saying why and what to install, unless tf.estimator works here."""
    available, reason = estimator_available()
    if not available:
        raise EstimatorUnavailable(
            f"{where} needs tf.estimator: {reason}. To use it, {INSTALL_HINT}"
        )


def estimator_classes() -> tuple[type, ...]:
    """The classes an estimator may be: `tf.estimator.Estimator` and `tf.compat.v1.estimator.Estimator`.

    In TensorFlow 2.x the v1 Estimators (`tf.compat.v1.estimator.DNNClassifier`, `LinearClassifier`,
    ...) do not subclass `tf.estimator.Estimator`; Determined trained both. Imports TensorFlow.
    """
    import tensorflow as tf

    return (tf.estimator.Estimator, tf.compat.v1.estimator.Estimator)


def is_estimator(value: object) -> bool:
    """Whether `value` is a v2 (`tf.estimator`) or v1 (`tf.compat.v1.estimator`) Estimator."""
    return isinstance(value, estimator_classes())
