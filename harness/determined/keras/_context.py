"""The Keras contexts and the `fit()` interception of the Native API.

`wrap_model(model)` registers the model and returns it unchanged (models need no proxy: the
Native API intercepts `keras.Model.fit` itself, which catches `keras` and `tf.keras` models alike,
and `tf_keras.Model.fit` when tf_keras is in use, see `_flavor`). While a Native context is
active, `fit()` on its model records its arguments and hands
them to the context's training function instead of training for `epochs`.

The interception is scoped: `activate_native_context(context)` (at `det.experimental.keras.init()`)
installs it, and it is removed again, leaving each `Model.fit` exactly as it was, when that
`fit()` starts the managed run or on `activate_native_context(None)`. Other models' `fit()` calls
in between pass straight through.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import keras

from determined import errors
from determined.experimental._context import NativeContext, TrialContextBase
from determined.keras import _flavor

logger = logging.getLogger("determined.keras")

_ORIGINAL_FITS: dict[Any, Callable[..., Any]] = {keras.Model: keras.Model.fit}


def _model_class(model: Any) -> Any:
    """`keras.Model` or `tf_keras.Model`, whichever `model` is an instance of."""
    module = _flavor.module_of(model)
    return module.Model if module is not None else keras.Model


def _original_fit_of(cls: Any) -> Callable[..., Any]:
    if cls not in _ORIGINAL_FITS:
        fit = cls.fit
        if fit is _managed_fit:  # pragma: no cover - installed before it was ever recorded
            raise errors.InternalException(f"{cls.__name__}.fit is intercepted and has no original")
        _ORIGINAL_FITS[cls] = fit
    return _ORIGINAL_FITS[cls]


def original_fit(model: Any, **kwargs: Any) -> Any:
    """Keras' own `fit` (Keras 3's or tf_keras'), whatever the Native API has installed over it."""
    return _original_fit_of(_model_class(model))(model, **kwargs)


@dataclasses.dataclass
class FitArguments:
    """What the user passed to `fit()` (epochs, batch_size and steps are decided by Determined)."""

    x: Any = None
    y: Any = None
    sample_weight: Any = None
    validation_data: Any = None
    callbacks: list = dataclasses.field(default_factory=list)
    class_weight: Any = None
    shuffle: bool = True
    verbose: Any = "auto"


_KERAS2_LOADER_ARGUMENTS = ("workers", "use_multiprocessing", "max_queue_size")

_IGNORED_FIT_ARGUMENTS = (
    "epochs",
    "batch_size",
    "steps_per_epoch",
    "initial_epoch",
    "validation_split",
    "validation_steps",
    "validation_freq",
    "validation_batch_size",
    "workers",  # tf_keras
    "use_multiprocessing",
    "max_queue_size",
)


def bind_fit_arguments(model: Any, args: tuple, kwargs: dict) -> FitArguments:
    signature = inspect.signature(_original_fit_of(_model_class(model)))
    # Keras 2's loader arguments (Determined-era scripts pass them) are not in Keras 3's fit.
    dropped = [
        name
        for name in _KERAS2_LOADER_ARGUMENTS
        if name in kwargs and name not in signature.parameters
    ]
    if dropped:
        logger.info("fit(%s=...): Keras 2 loader arguments, ignored", ", ".join(dropped))
        kwargs = {k: v for k, v in kwargs.items() if k not in dropped}
    bound = signature.bind(model, *args, **kwargs)
    given = dict(bound.arguments)
    given.pop("self", None)
    ignored = [
        name for name in _IGNORED_FIT_ARGUMENTS if name in given and given[name] not in (None, 1, 0)
    ]
    if ignored:
        logger.info(
            "fit(%s=...): ignored under Determined; the training length comes from the searcher "
            "(searcher.max_length) and the batch size from hyperparameters.global_batch_size",
            ", ".join(ignored),
        )
    if given.get("validation_split"):
        raise errors.InvalidExperimentException(
            "fit(validation_split=...) is not supported under Determined: pass validation_data=(x_val, y_val)"
        )
    return FitArguments(
        x=given.get("x"),
        y=given.get("y"),
        sample_weight=given.get("sample_weight"),
        validation_data=given.get("validation_data"),
        callbacks=list(given.get("callbacks") or []),
        class_weight=given.get("class_weight"),
        shuffle=bool(given.get("shuffle", True)),
        verbose=given.get("verbose", "auto"),
    )


def check_compiled(model: Any) -> None:
    if getattr(model, "optimizer", None) is None or not getattr(model, "compiled", True):
        raise errors.InvalidExperimentException(
            f"{type(model).__name__}.fit() was called before compile(): call "
            "model.compile(optimizer=..., loss=..., metrics=[...]) on the wrapped model first"
        )


class _FitInterception:
    """`fit` of `keras.Model` (and `tf_keras.Model` when in use) replaced by `_managed_fit` for one
    Native context, until `restore()`.

    Keras 3 defines `fit` on a base class of `keras.Model` (the backend's trainer), so installing
    puts an attribute on `keras.Model` itself; restoring removes it again rather than copying the
    inherited function onto it, so each class is left exactly as it was found.
    """

    _INHERITED = object()

    def __init__(self) -> None:
        self.context: TFKerasNativeContext | None = None
        self._found: dict[Any, Any] = {}  # class -> its own `fit` before install (or _INHERITED)
        self._passthrough: dict[Any, Callable[..., Any]] = {}  # what other models' fit() runs

    def install(self, context: TFKerasNativeContext) -> None:
        self.context = context
        for cls in _flavor.model_classes():
            self.cover(cls)

    def cover(self, cls: Any) -> None:
        """Intercept `cls.fit` too (a tf_keras model wrapped after `install`)."""
        if self.context is None or cls in self._found or cls.fit is _managed_fit:
            return
        _original_fit_of(cls)
        self._found[cls] = vars(cls).get("fit", self._INHERITED)
        self._passthrough[cls] = cls.fit
        cls.fit = _managed_fit

    def restore(self) -> None:
        self.context = None
        for cls, found in self._found.items():
            if vars(cls).get("fit") is not _managed_fit:
                continue  # replaced by someone else since
            if found is self._INHERITED:
                delattr(cls, "fit")
            else:
                cls.fit = found
        self._found.clear()
        self._passthrough.clear()

    def passthrough(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        cls = _model_class(model)
        fit = self._passthrough.get(cls) or _original_fit_of(cls)
        return fit(model, *args, **kwargs)


_interception = _FitInterception()


def _managed_fit(self: Any, *args: Any, **kwargs: Any) -> Any:
    context = _interception.context
    if context is None or (context._model is not None and self is not context._model):
        return _interception.passthrough(self, *args, **kwargs)
    if context._model is None:
        logger.info(
            "fit() on a model that was not passed to context.wrap_model(): managing it anyway"
        )
        context._model = self
    check_compiled(self)
    fit_args = bind_fit_arguments(self, args, kwargs)
    if fit_args.validation_data is None:
        raise errors.InvalidExperimentException(
            "fit(): validation_data is required under Determined (validation metrics drive the "
            "searcher and checkpoints): pass validation_data=(x_val, y_val) or a dataset"
        )
    if context._train_fn is None:
        raise errors.InternalException("the Native context has no training function")
    context._fit_arguments = fit_args
    # This fit() starts the managed run: from here on fit() is Keras' own again, for the run
    # itself (its callbacks may call fit) and for whatever the script does afterwards. A fit()
    # refused above keeps the interception, so the user can fix the call and try again.
    _interception.restore()
    return context._train_fn()


def activate_native_context(context: TFKerasNativeContext | None) -> None:
    """Route `fit()` of the context's model to its training function, until that `fit()` starts
    the managed run; None removes the interception (`keras.Model.fit` is as it was before)."""
    if context is None:
        _interception.restore()
    else:
        _interception.install(context)


class _KerasContextMixin:
    _model: Any = None
    _fit_config: dict

    def _init_keras(self) -> None:
        self._model = None
        self._fit_config = {}
        self._fit_arguments: FitArguments | None = None

    def wrap_model(self, model: Any) -> Any:
        """Register the model Determined trains (returned unchanged).

        Args:
            model: a `keras.Model` (Keras 3) or a `tf_keras.Model` (Keras 2, what `tf.keras` is
                under `TF_USE_LEGACY_KERAS=1`).

        Returns:
            The same model.
        """
        module = _flavor.module_of(model)
        if module is None:
            raise TypeError(
                "wrap_model() takes a keras.Model (Keras 3, also tf.keras) or a tf_keras.Model "
                f"(tf.keras under TF_USE_LEGACY_KERAS=1), got {type(model).__name__}"
            )
        if _interception.context is self:
            _interception.cover(module.Model)
        self._model = model
        return model

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """Kept for Determined compatibility: there is nothing to wrap here.

        Args:
            optimizer: a Keras optimizer.

        Returns:
            `optimizer` itself.
        """
        # Single-process training: there is nothing to wrap (Determined wrapped it for horovod).
        return optimizer

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        """Kept for Determined compatibility: datasets are not wrapped or sharded here.

        Args:
            dataset: a dataset.
            shard_dataset: ignored.

        Returns:
            `dataset` itself.
        """
        return dataset

    def configure_fit(
        self,
        verbose: Any = None,
        class_weight: Any = None,
        workers: Any = None,
        use_multiprocessing: Any = None,
        max_queue_size: Any = None,
        shuffle: Any = None,
        validation_steps: Any = None,
    ) -> None:
        """Set training options that `fit()` would otherwise take (the values given win over fit's).

        Args:
            verbose: recorded but unused (training runs without Keras' progress output).
            class_weight: passed to Keras' training as `class_weight`.
            workers: ignored (logged).
            use_multiprocessing: ignored (logged).
            max_queue_size: ignored (logged).
            shuffle: whether array training data is shuffled every epoch.
            validation_steps: ignored (logged).
        """
        for name, value in (
            ("verbose", verbose),
            ("class_weight", class_weight),
            ("shuffle", shuffle),
        ):
            if value is not None:
                self._fit_config[name] = value
        if any(
            v is not None for v in (workers, use_multiprocessing, max_queue_size, validation_steps)
        ):
            logger.info(
                "configure_fit(): workers/use_multiprocessing/max_queue_size/validation_steps are ignored"
            )

    @property
    def experimental(self) -> TFKerasExperimentalContext:
        """`context.experimental` (Determined's dataset caching, removed there in 0.18)."""
        return TFKerasExperimentalContext()


TFKerasContext = _KerasContextMixin
"""The base of both Keras contexts (Determined 0.13's name)."""


class TFKerasExperimentalContext:
    """`context.experimental` of the Keras contexts: the dataset-caching methods Determined
    removed in 0.18 (they raise, with Determined's message)."""

    def cache_train_dataset(self, *args: Any) -> Any:
        """Removed in Determined 0.18: always raises.

        Args:
            *args: ignored.

        Raises:
            RuntimeError: always; cache with `tf.data.Dataset.cache()` instead.
        """
        raise RuntimeError(
            "cache_train_dataset was deprecated in Determined 0.18.0 and removed; use yogadl "
            "directly or tf.data.Dataset.cache()"
        )

    def cache_validation_dataset(self, *args: Any) -> Any:
        """Removed in Determined 0.18: always raises.

        Args:
            *args: ignored.

        Raises:
            RuntimeError: always; cache with `tf.data.Dataset.cache()` instead.
        """
        raise RuntimeError(
            "cache_validation_dataset was deprecated in Determined 0.18.0 and removed; use "
            "yogadl directly or tf.data.Dataset.cache()"
        )


class TFKerasTrainConfig(NamedTuple):
    """Training data, validation data and callbacks of a Keras trial (Determined's internal
    record of them, exported by it)."""

    training_data: Any
    validation_data: Any
    callbacks: list


class TFKerasTrialContext(_KerasContextMixin, TrialContextBase):
    """The context a `TFKerasTrial` receives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        TrialContextBase.__init__(self, *args, **kwargs)
        self._init_keras()


class TFKerasNativeContext(_KerasContextMixin, NativeContext):
    """What `det.experimental.keras.init()` returns: hyperparameters now, training at `fit()`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        NativeContext.__init__(self, *args, **kwargs)
        self._init_keras()
