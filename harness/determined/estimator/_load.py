"""`det.estimator.load_estimator_from_checkpoint_path()`: the SavedModel a checkpoint holds."""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Any

logger = logging.getLogger("determined.estimator")

_ESTIMATOR_FORMATS = ("estimator", "saved_model")


def _check_checkpoint(ckpt_dir: pathlib.Path) -> None:
    """Warn (only) when the directory does not look like an Estimator checkpoint, as Determined does."""
    load_data, metadata_file = ckpt_dir / "load_data.json", ckpt_dir / "metadata.json"
    if load_data.exists():
        if json.loads(load_data.read_text()).get("trial_type") != "EstimatorTrial":
            logger.warning(
                "Checkpoint does not appear to be a valid EstimatorTrial checkpoint, continuing anyway..."
            )
    elif metadata_file.exists():
        metadata = json.loads(metadata_file.read_text())
        framework = str(metadata.get("framework", ""))
        is_tf = framework.startswith("tensorflow") or "tensorflow_version" in metadata
        if not is_tf or metadata.get("format", "saved_model") not in _ESTIMATOR_FORMATS:
            logger.warning(
                "Checkpoint does not appear to be a valid EstimatorTrial checkpoint, continuing anyway..."
            )
    else:
        logger.warning(
            "Unable to confirm that checkpoint is a valid EstimatorTrial checkpoint, continuing anyway..."
        )


def load_estimator_from_checkpoint_path(path: str, tags: list[str] | None = None) -> Any:
    """Load the SavedModel in a checkpoint written by an `EstimatorTrial` (or the Estimator Native API).

    Download the checkpoint first (e.g. `Checkpoint.download()`). A checkpoint holds a SavedModel
    for every serving_input_receiver_fn (`EstimatorTrial.build_serving_input_receiver_fns()`, or
    `context.set_serving_input_receiver_fns()` / `context.serving_input_receiver_fns` in the Native
    API), under `saved_models/<name>/<timestamp>/`; it must hold exactly one.

    Args:
        path: the checkpoint's top-level directory.
        tags: the MetaGraph tags to load (see `tf.compat.v1.saved_model.load_v2`); default `["serve"]`,
            the inference graph.

    Returns:
        The loaded TensorFlow AutoTrackable object: call its `signatures` (`"predict"`,
        `"serving_default"`, ...) to run the model.

    Raises:
        FileNotFoundError: the directory holds no `saved_model.pb` (no serving_input_receiver_fn
            was given when the checkpoint was written).
        AssertionError: it holds more than one.
    """
    import tensorflow as tf

    ckpt_dir = pathlib.Path(path)
    _check_checkpoint(ckpt_dir)
    saved_models = sorted(ckpt_dir.glob("**/saved_model.pb"))
    if len(saved_models) > 1:
        raise AssertionError(
            f"Checkpoint directory {ckpt_dir} contains multiple nested saved_model.pb files: "
            f"{[str(p) for p in saved_models]}"
        )
    if not saved_models:
        raise FileNotFoundError(
            f"Checkpoint directory {ckpt_dir} holds no SavedModel (saved_model.pb): it holds the "
            "estimator's TensorFlow checkpoint only. Return a serving_input_receiver_fn from "
            "build_serving_input_receiver_fns() to have one exported into every checkpoint, or "
            "restore the variables with tf.estimator's warm_start_from / model_dir."
        )
    if tags is None:
        logger.info('No tags specified. Loading "serve" tag from saved_model.')
        tags = ["serve"]
    return tf.compat.v1.saved_model.load_v2(str(saved_models[0].parent), tags)
