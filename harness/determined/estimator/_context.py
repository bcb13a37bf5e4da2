"""The Estimator contexts: `EstimatorTrialContext` (Trial API) and `EstimatorNativeContext` (Native API).

Both add to the framework-free `TrialContextBase` the wrappers Determined's Estimator contexts
offered, and `make_metric` (also as `context.experimental.make_metric`). With one slot per trial
there is nothing to distribute, so `wrap_optimizer` and `wrap_dataset` hand their argument back;
`wrap_run_config` seeds the graph with the trial seed. TensorFlow is imported only by
`wrap_run_config` and `make_metric`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from determined import errors
from determined.estimator._reducer import MetricReducer, make_metric
from determined.experimental._context import NativeContext, TrialContextBase

ServingInputReceiverFn = Callable[..., Any]
"""The type of a serving_input_receiver_fn: no arguments, returns a
`tf.estimator.export.ServingInputReceiver` (or `TensorServingInputReceiver`), e.g. one built by
`tf.estimator.export.build_parsing_serving_input_receiver_fn(...)`. `EstimatorTrial.
build_serving_input_receiver_fns()` returns a dict of name -> ServingInputReceiverFn."""


class EstimatorExperimentalContext:
    """`context.experimental` of the Estimator contexts (Determined 0.13-0.24)."""

    def __init__(self, context: EstimatorContext) -> None:
        self._context = context

    def make_metric(
        self, metric: Any, reducer: Callable[[list[Any]], Any] | MetricReducer, numpy_dtype: Any
    ) -> tuple[Any, Any]:
        """The same as `context.make_metric()` (its 0.13-0.16 place)."""
        return make_metric(metric, reducer, numpy_dtype)

    def allgather_metrics(self, metrics: Any) -> list[Any]:
        """Every slot's `metrics`, in rank order: with one slot per trial, `[metrics]`."""
        return [metrics]


class EstimatorContext:
    """What both Estimator contexts offer on top of the common ones: the wrappers and `make_metric`."""

    _trial_seed: int

    @property
    def experimental(self) -> EstimatorExperimentalContext:
        """`make_metric()` and `allgather_metrics()`, where Determined 0.13 had them."""
        return EstimatorExperimentalContext(self)

    def make_metric(
        self, metric: Any, reducer: Callable[[list[Any]], Any] | MetricReducer, numpy_dtype: Any
    ) -> tuple[Any, Any]:
        """A validation metric computed in Python: `(value_op, update_op)` for `eval_metric_ops`.

        `reducer` is a `det.estimator.MetricReducer` or a function of the list of every batch's
        value of `metric` (a tensor, a flat list of tensors or a dict of str -> tensor); `numpy_dtype`
        is the result's dtype. See `determined.estimator._reducer.make_metric`.
        """
        return make_metric(metric, reducer, numpy_dtype)

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """Determined wrapped the optimizer for Horovod; a one-slot trial trains with it as is."""
        return optimizer

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        """Determined sharded the dataset across Horovod workers; one slot reads all of it."""
        return dataset

    def wrap_run_config(self, config: Any) -> Any:
        """The `tf.estimator.RunConfig` with `tf_random_seed` set to the trial seed when it is unset.

        The managed loop trains in a model_dir of its own whatever `model_dir` says (checkpoints go to
        Determined's checkpoint storage), and applies the same seeding to estimators built without this.
        """
        if config.tf_random_seed is not None:
            return config
        return config.replace(tf_random_seed=self._trial_seed)


class EstimatorTrialContext(EstimatorContext, TrialContextBase):
    """What `EstimatorTrial` methods see as `self.context`: hyperparameters, ids, batch sizes, wrappers."""


class EstimatorNativeContext(EstimatorContext, NativeContext):
    """Returned by `det.experimental.estimator.init()`; `train_and_evaluate()` hands over to Determined."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.estimator: Any = None
        self.train_spec: Any = None
        self.eval_spec: Any = None
        self.serving_input_receiver_fns: dict[str, Callable[[], Any]] = {}

    def train_and_evaluate(self, estimator: Any, train_spec: Any, eval_spec: Any) -> Any:
        """Train `estimator` under Determined (see `det.experimental.estimator`).

        The training length comes from the searcher (`train_spec.max_steps` is ignored), validation
        from `min_validation_period` and the end of each searcher operation (`eval_spec` throttling
        is ignored). In-process runs return `(last validation metrics, [])` like
        `tf.estimator.train_and_evaluate`; in a trial re-executed by `determined.exec.native` the
        script stops here and the trial trains.
        """
        import tensorflow as tf

        from determined.estimator._availability import is_estimator

        if not is_estimator(estimator):
            raise errors.InvalidExperimentException(
                "train_and_evaluate(estimator=...): expected a tf.estimator.Estimator (or a "
                f"tf.compat.v1.estimator.Estimator), got {type(estimator).__name__}"
            )
        if not isinstance(train_spec, tf.estimator.TrainSpec) or not isinstance(
            eval_spec, tf.estimator.EvalSpec
        ):
            raise errors.InvalidExperimentException(
                "train_and_evaluate(estimator, train_spec, eval_spec): train_spec must be a tf.estimator.TrainSpec "
                f"and eval_spec a tf.estimator.EvalSpec (got {type(train_spec).__name__}, {type(eval_spec).__name__})"
            )
        self.estimator, self.train_spec, self.eval_spec = estimator, train_spec, eval_spec
        if self._train_fn is None:
            raise errors.InternalException(
                "EstimatorNativeContext without a train function: use det.experimental.estimator.init()"
            )
        return self._train_fn()

    def set_serving_input_receiver_fns(self, fns: dict[str, Callable[[], Any]]) -> None:
        """SavedModels to export into every checkpoint (name -> serving_input_receiver_fn)."""
        self.serving_input_receiver_fns = dict(fns)
