"""Loading the Keras checkpoints of a `TFKerasTrial` written by Determined 0.13 to 0.2x.

Those releases saved only weights: `determined-keras-model.h5` (before 0.13.8, `format: h5`) or
TensorFlow checkpoint files `determined-keras-model-weights.{index,data-*}` (`format:
saved_weights`), with the model definition in `code/`. Rebuilding the model needs the trial: its
class comes from `load_data.json` (0.17.7 on) or, before that, from the `metadata.json` that
`Checkpoint.download()` wrote from the master's record (`experiment_config.entrypoint`). The
trial's `build_model()` builds the model, which then gets the weights.

The trial code is Keras 2 code. Under tf_keras (`TF_USE_LEGACY_KERAS=1`) the weights load as
Keras 2 wrote them; under Keras 3 an `.h5` loads with Keras 3's own legacy reader and the
TensorFlow checkpoint files are read variable by variable (Keras 3 cannot read that format).
"""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Any

from determined import _import, errors
from determined.keras import _flavor

logger = logging.getLogger("determined.keras")

WEIGHTS_PREFIX = "determined-keras-model-weights"
H5_FILE = "determined-keras-model.h5"


def is_ancient(directory: pathlib.Path) -> bool:
    """True when `directory` holds a weights-only checkpoint of an old Determined TFKerasTrial."""
    return (directory / H5_FILE).exists() or (directory / f"{WEIGHTS_PREFIX}.index").exists()


def _record(directory: pathlib.Path) -> tuple[str, dict[str, Any], dict[str, Any], pathlib.Path]:
    """(trial class spec, hparams, experiment config, weights file) of an old checkpoint."""
    load_data_file = directory / "load_data.json"
    metadata_file = directory / "metadata.json"
    if load_data_file.exists():
        record = json.loads(load_data_file.read_text())
        if record.get("trial_type", "TFKerasTrial") != "TFKerasTrial":
            logger.warning(
                "%s says trial_type %r, not TFKerasTrial: loading it anyway",
                load_data_file,
                record.get("trial_type"),
            )
        config = record.get("experiment_config") or {}
        spec = record.get("trial_cls_spec") or config.get("entrypoint")
        hparams = record.get("hparams") or {}
        weights = directory / WEIGHTS_PREFIX
    elif metadata_file.exists():
        metadata = json.loads(metadata_file.read_text())
        config = metadata.get("experiment_config") or {}
        hparams = metadata.get("hparams") or {}
        # When this layout was written, every entrypoint was a trial class.
        spec = config.get("entrypoint")
        weights = directory / (H5_FILE if metadata.get("format") == "h5" else WEIGHTS_PREFIX)
    else:
        raise errors.InvalidExperimentException(
            f"{directory} has neither load_data.json nor metadata.json: checkpoints written by "
            "Determined 0.17.6 and earlier hold too little to be loaded from their files alone. "
            "Download the checkpoint with Checkpoint.download() (which writes metadata.json), or "
            "write it with Checkpoint.write_metadata_file('metadata.json')"
        )
    if not spec or ":" not in spec:
        raise errors.InvalidExperimentException(
            f"the checkpoint in {directory} names no trial class (entrypoint 'module:Class'), "
            f"found {spec!r}: it cannot be rebuilt"
        )
    return spec, hparams, config, weights


def _trial_class(spec: str, code_dir: pathlib.Path) -> Any:
    module_name, _, qualname = spec.partition(":")
    try:
        obj: Any = _import.import_module_in(code_dir, module_name)
    except ImportError as e:
        raise ImportError(
            f"cannot import {module_name!r} from {code_dir} (the trial class {spec!r} of the "
            f"checkpoint): {e}. Code of Determined's Keras 2 era that imports "
            "`tensorflow.keras.optimizers.legacy` needs tf_keras: set TF_USE_LEGACY_KERAS=1 "
            "before TensorFlow is imported"
        ) from e
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def load_ancient(directory: pathlib.Path) -> Any:
    """The model of an old Determined TFKerasTrial checkpoint in `directory`, with its weights."""
    from determined.keras._context import TFKerasTrialContext

    spec, hparams, config, weights = _record(directory)
    trial_class = _trial_class(spec, directory / "code")
    seed = (config.get("reproducibility") or {}).get("experiment_seed")
    context = TFKerasTrialContext(config, hparams, trial_seed=seed if isinstance(seed, int) else 0)
    model = trial_class(context).build_model()
    module = _flavor.module_of(model)
    if weights.suffix == ".h5":
        model.load_weights(str(weights))
    elif module is not None and _flavor.is_tf_keras(module):
        status = model.load_weights(str(weights))
        if hasattr(status, "expect_partial"):
            status.expect_partial()  # the optimizer's slots are not wanted here
    else:
        _assign_from_tf_checkpoint(model, weights)
    return model


def _assign_from_tf_checkpoint(model: Any, prefix: pathlib.Path) -> None:
    """Give a Keras 3 model the weights of a TensorFlow checkpoint Keras 2 wrote for the same
    architecture: Keras 2 tracked the model's N-th layer with weights as `layer_with_weights-N`
    and each of its variables under its own name."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    saved = reader.get_variable_to_shape_map()
    layers = [layer for layer in model.layers if layer.weights]
    for index, layer in enumerate(layers):
        for variable in layer.weights:
            name = variable.name.split("/")[-1].split(":")[0]
            key = f"layer_with_weights-{index}/{name}/.ATTRIBUTES/VARIABLE_VALUE"
            if key not in saved:
                raise errors.InvalidExperimentException(
                    f"{prefix} has no {key} for layer {layer.name!r} (variable {name!r}): the "
                    "trial's build_model() builds another architecture than the checkpoint's, "
                    "or nests models; load it under tf_keras (TF_USE_LEGACY_KERAS=1)"
                )
            value = reader.get_tensor(key)
            if tuple(value.shape) != tuple(variable.shape):
                raise errors.InvalidExperimentException(
                    f"{prefix}: {key} has shape {tuple(value.shape)} but layer {layer.name!r}'s "
                    f"{name} has {tuple(variable.shape)}: not the architecture that was saved"
                )
            variable.assign(value)
