"""`det.keras.TFKerasTrial`: the Trial API for Keras models (deprecated in Determined 0.38, kept)."""

from __future__ import annotations

from typing import Any

from determined.keras._context import TFKerasTrialContext


class TFKerasTrial:
    """Subclass it and implement `build_model`, `build_training_data_loader`, `build_validation_data_loader`.

    `build_model()` must wrap the model with `self.context.wrap_model(model)` and compile it.
    The data loaders return `(x, y)`, `(x, y, sample_weight)`, a batched `tf.data.Dataset` or a
    `keras.utils.PyDataset`; arrays are batched with `context.get_per_slot_batch_size()`.

    Args:
        context: the trial's `TFKerasTrialContext`, kept as `self.context`.
    """

    trial_context_class = TFKerasTrialContext

    def __init__(self, context: TFKerasTrialContext) -> None:
        self.context = context

    def build_model(self) -> Any:
        """Build, wrap and compile the model; called once, after `__init__` and before the loaders.

        Call `self.context.wrap_model(model)` before `model.compile(...)`. A returned model that
        was not wrapped is used anyway (with a log message).

        Returns:
            The compiled `keras.Model` (or `tf_keras.Model`).

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            "TFKerasTrial.build_model() must return a wrapped, compiled keras.Model"
        )

    def build_training_data_loader(self) -> Any:
        """Build the training data; called once, after `build_model`.

        Returns:
            `(x, y)` or `(x, y, sample_weight)` arrays, which are batched with
            `context.get_per_slot_batch_size()` and shuffled every epoch (unless
            `context.configure_fit(shuffle=False)`); or a batched `tf.data.Dataset`, a
            `keras.utils.PyDataset` or a `det.keras.SequenceAdapter`, used as they are.

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            "TFKerasTrial.build_training_data_loader() must return the training data"
        )

    def build_validation_data_loader(self) -> Any:
        """Build the validation data; called once, after `build_training_data_loader`.

        Returns:
            `(x, y)` or `(x, y, sample_weight)` arrays, batched with
            `context.get_per_slot_batch_size()`; or a batched `tf.data.Dataset`, a
            `keras.utils.PyDataset` or a `det.keras.SequenceAdapter`, used as they are.

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            "TFKerasTrial.build_validation_data_loader() must return the validation data"
        )

    def session_config(self) -> Any:
        """TF1-era hook, kept for compatibility; Keras 3 ignores it."""
        return None

    def keras_callbacks(self) -> list:
        """Keras callbacks for training; called once, after the data loaders are built.

        Although training runs as several `fit` calls, the callbacks see one training run.

        Returns:
            A list of `keras.callbacks.Callback` (`det.keras.callbacks.Callback` for Determined's
            own hooks); an empty list by default.
        """
        return []
