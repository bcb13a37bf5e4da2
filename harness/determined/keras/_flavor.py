"""The two Kerases a model may come from, and what differs between them for the managed loop.

* Keras 3 (`import keras`; `tf.keras` is Keras 3 from TensorFlow 2.16 on);
* Keras 2 (`import tf_keras`; `tf.keras` is tf_keras when the environment has
  `TF_USE_LEGACY_KERAS=1` before TensorFlow is imported). Determined-era code needs it:
  `optimizers.Adam(lr=...)`, `optimizers.legacy`, `fit_generator`, `keras.utils.Sequence`.

Their classes are disjoint (a Keras 3 callback cannot be passed to a tf_keras model's `fit`), so
the loop asks `module_of(model)` which one a model belongs to and builds its callbacks and data
wrappers from that module. `tf_keras` is never imported here unless the environment asks for it
(`TF_USE_LEGACY_KERAS`) or a tf_keras model already exists (then it is in `sys.modules`).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any

import keras

KERAS3 = "keras"
TF_KERAS = "tf_keras"


def legacy_requested() -> bool:
    """True when `tf.keras` is tf_keras in this process (TensorFlow's own test of the variable)."""
    return os.environ.get("TF_USE_LEGACY_KERAS", "") in ("true", "True", "1")


def tf_keras_module(*, import_it: bool = False) -> types.ModuleType | None:
    """The `tf_keras` module if it is imported (or `import_it` and it is installed), else None."""
    module = sys.modules.get("tf_keras")
    if module is None and import_it:
        try:
            module = importlib.import_module("tf_keras")
        except ImportError:
            return None
    return module


def default_module() -> types.ModuleType:
    """What `tf.keras` is in this process: tf_keras under `TF_USE_LEGACY_KERAS=1`, else Keras 3."""
    if legacy_requested():
        module = tf_keras_module(import_it=True)
        if module is None:
            raise ImportError(
                "TF_USE_LEGACY_KERAS=1 needs the tf-keras package matching TensorFlow "
                "(pip install --no-deps 'tf-keras==<TensorFlow's major.minor>.*')"
            )
        return module
    return keras


def module_of(model: Any) -> types.ModuleType | None:
    """`keras` or `tf_keras`, whichever `model` is a Model of; None for anything else."""
    if isinstance(model, keras.Model):
        return keras
    tf_keras = tf_keras_module()
    if tf_keras is not None and isinstance(model, tf_keras.Model):
        return tf_keras
    return None


def is_tf_keras(module: types.ModuleType) -> bool:
    return module.__name__.split(".")[0] == TF_KERAS


def model_classes() -> list[type]:
    """The Model classes whose `fit` the Native API intercepts (tf_keras' only when it is in use)."""
    classes: list[type] = [keras.Model]
    tf_keras = tf_keras_module(import_it=legacy_requested())
    if tf_keras is not None:
        classes.append(tf_keras.Model)
    return classes


_specialised: dict[tuple[type, str], type] = {}


def specialise(mixin: type, module: types.ModuleType, base: str = "Callback") -> type:
    """`mixin` over `module.callbacks.<base>`: one class per Keras, made once.

    Args:
        mixin: a plain class holding the behaviour (its `super()` calls reach the Keras base).
        module: `keras` or `tf_keras`.
        base: the name of the base class in `module.callbacks`.

    Returns:
        The combined class, named like the mixin.
    """
    key = (mixin, module.__name__)
    if key not in _specialised:
        _specialised[key] = type(
            mixin.__name__,
            (mixin, getattr(module.callbacks, base)),
            {"__module__": mixin.__module__, "__qualname__": mixin.__qualname__},
        )
    return _specialised[key]


def steps_per_execution(model: Any) -> int:
    """The model's steps per execution (an int in Keras 3, a tf.Variable in tf_keras)."""
    value = getattr(model, "steps_per_execution", None) or getattr(
        model, "_steps_per_execution", None
    )
    if value is None:
        return 1
    try:
        return max(1, int(getattr(value, "numpy", lambda: value)()))
    except (TypeError, ValueError):
        return 1
