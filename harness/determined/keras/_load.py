"""`det.keras.load_model_from_checkpoint_path` and the RNG state helpers Determined exported."""

from __future__ import annotations

import json
import pathlib
import random
from typing import Any

import numpy as np

from determined import errors
from determined.keras import _ancient, _flavor

# What a checkpoint of the managed loop (`model.keras`) or of DeterminedCallback holds.
_MODEL_FILES = ("model.keras", "model_checkpoint.keras")


def load_model_from_checkpoint_path(path: str, tags: list[str] | None = None) -> Any:
    """Load the model of a checkpoint written by a `TFKerasTrial`, the Keras Native API or
    `DeterminedCallback` (download it first, e.g. with `Checkpoint.download()`).

    Determined returned a TensorFlow SavedModel object; this returns the compiled Keras model
    (Keras 3, or tf_keras when the checkpoint was written from a tf_keras model), which can
    also `predict`. Custom layers need `keras.saving.register_keras_serializable`.

    Checkpoints of Determined 0.13 to 0.2x TFKerasTrials (`determined-keras-model.h5` or
    `determined-keras-model-weights.*` with `code/`) load too: the trial class recorded in
    `load_data.json`, or in the `metadata.json` that `Checkpoint.download()` wrote, is imported
    from `code/` and its `build_model()` gets the weights.

    Args:
        path: the checkpoint's directory.
        tags: SavedModel tags (Determined's SavedModel checkpoints); ignored.

    Returns:
        The model.
    """
    directory = pathlib.Path(path)
    if not any((directory / name).exists() for name in _MODEL_FILES) and _ancient.is_ancient(
        directory
    ):
        return _ancient.load_ancient(directory)
    metadata_file = directory / "metadata.json"
    metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
    for name in _MODEL_FILES:
        file = directory / name
        if file.exists():
            module = None
            if metadata.get("keras") == _flavor.TF_KERAS:
                module = _flavor.tf_keras_module(import_it=True)
            if module is None:
                import keras

                return keras.models.load_model(file)
            return module.models.load_model(file)
    raise errors.InvalidExperimentException(
        f"{path} holds no Keras model ({' or '.join(_MODEL_FILES)}): not a checkpoint of a "
        "TFKerasTrial, the Keras Native API or DeterminedCallback"
    )


def get_rng_state() -> dict[str, Any]:
    """The random states Determined restores on resume: numpy's, Python's and TensorFlow's
    global generator.

    Returns:
        A dict for `set_rng_state`.
    """
    import tensorflow as tf

    generator = tf.random.get_global_generator()
    return {
        "np_rng_state": np.random.get_state(),
        "random_rng_state": random.getstate(),
        "tf2_rng_global_algorithm": generator.algorithm,
        "tf2_rng_global_state": generator.state.numpy(),
    }


def set_rng_state(rng_state: dict[str, Any]) -> None:
    """Restore what `get_rng_state()` returned.

    Args:
        rng_state: the states.
    """
    import tensorflow as tf

    np.random.set_state(rng_state["np_rng_state"])
    random.setstate(rng_state["random_rng_state"])
    if "tf_rng_global_seed" in rng_state:
        tf.random.set_seed(rng_state["tf_rng_global_seed"])
    if "tf2_rng_global_algorithm" in rng_state and "tf2_rng_global_state" in rng_state:
        tf.random.set_global_generator(
            tf.random.Generator.from_state(
                rng_state["tf2_rng_global_state"], rng_state["tf2_rng_global_algorithm"]
            )
        )
