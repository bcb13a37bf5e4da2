"""`det.keras.TFKerasTrial`: the Trial API for Keras models (deprecated in Determined 0.38, kept)."""

from __future__ import annotations

from typing import Any

from determined.keras._context import TFKerasTrialContext


class TFKerasTrial:
    """Subclass it and implement `build_model`, `build_training_data_loader`, `build_validation_data_loader`.

    `build_model()` must wrap the model with `self.context.wrap_model(model)` and compile it.
    The data loaders return `(x, y)`, `(x, y, sample_weight)`, a batched `tf.data.Dataset` or a
    `keras.utils.PyDataset`; arrays are batched with `context.get_per_slot_batch_size()`.
    """

    trial_context_class = TFKerasTrialContext

    def __init__(self, context: TFKerasTrialContext) -> None:
        self.context = context

    def build_model(self) -> Any:
        raise NotImplementedError(
            "TFKerasTrial.build_model() must return a wrapped, compiled keras.Model"
        )

    def build_training_data_loader(self) -> Any:
        raise NotImplementedError(
            "TFKerasTrial.build_training_data_loader() must return the training data"
        )

    def build_validation_data_loader(self) -> Any:
        raise NotImplementedError(
            "TFKerasTrial.build_validation_data_loader() must return the validation data"
        )

    def session_config(self) -> Any:
        """TF1-era hook, kept for compatibility; Keras 3 ignores it."""
        return None

    def keras_callbacks(self) -> list:
        return []
