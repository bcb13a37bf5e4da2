"""`det.estimator.MetricReducer` and `make_metric()`: validation metrics computed in Python.

`make_metric(metric, reducer, numpy_dtype)` returns a tf.metrics-style `(value_op, update_op)`
pair for `EstimatorSpec(eval_metric_ops=...)`: the update op hands each batch's values to the
reducer (`accumulate`), the value op asks it for the result (`cross_slot_reduce` over the list of
per-slot states; a trial trains on one slot here, so the list has one element).

`MetricReducer` itself needs no TensorFlow; `make_metric` imports it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any


class MetricReducer(abc.ABC):
    """Accumulates a validation metric batch by batch, then reduces the per-slot results.

    Subclass it and pass an instance to `context.make_metric()` (a new instance per model_fn
    call: each evaluation builds a new graph):

    .. code:: python

        class MyAvgMetricReducer(det.estimator.MetricReducer):
            def __init__(self):
                self.sum, self.count = 0, 0

            def accumulate(self, metric):
                self.sum += metric.sum()
                self.count += len(metric)
                return self.sum, self.count

            def cross_slot_reduce(self, per_slot_metrics):
                sums, counts = zip(*per_slot_metrics)
                return sum(sums) / sum(counts)
    """

    @abc.abstractmethod
    def accumulate(self, metric: Any) -> Any:
        """Called with each evaluation batch's value of the metric (numpy arrays, or a list/dict of
        them); returns the state so far. The last returned state goes to `cross_slot_reduce`."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        """The final metric from the last `accumulate()` result of every slot (one slot here)."""


class _SimpleMetricReducer(MetricReducer):
    """A `MetricReducer` from a function of the list of all per-batch values."""

    def __init__(self, reduce_fn: Callable[[list[Any]], Any]) -> None:
        self.updates: list[Any] = []
        self.reduce_fn = reduce_fn

    def reset(self) -> None:
        self.updates = []

    def accumulate(self, metric: Any) -> list[Any]:
        self.updates.append(metric)
        return self.updates

    def cross_slot_reduce(self, per_slot_metrics: list[list[Any]]) -> Any:
        return self.reduce_fn([item for per_slot in per_slot_metrics for item in per_slot])


def _flatten(metric: Any) -> tuple[Sequence[Any], Callable[[Sequence[Any]], Any]]:
    """The tensors to feed a py_func, and how to rebuild the user's structure from their values."""
    import tensorflow as tf

    tensor_types = (tf.Tensor, tf.Variable)
    if isinstance(metric, dict):
        if not all(isinstance(key, str) for key in metric) or not all(
            isinstance(value, tensor_types) for value in metric.values()
        ):
            raise TypeError("a dict metric must map strings to tf.Tensors")
        keys = list(metric)
        return [metric[key] for key in keys], lambda values: dict(zip(keys, values, strict=True))
    if isinstance(metric, (list, tuple)):
        if not all(isinstance(value, tensor_types) for value in metric):
            raise TypeError("a list metric must be a flat list of tf.Tensors")
        return list(metric), list
    if not isinstance(metric, tensor_types):
        try:
            metric = tf.compat.v1.constant(metric)
        except TypeError as err:
            raise TypeError(
                "metric must be a tf.Tensor, a list of tf.Tensors or a dict of str -> tf.Tensor, "
                f"not {type(metric).__name__}"
            ) from err
    return [metric], lambda values: values[0]


def make_metric(
    metric: Any,
    reducer: Callable[[list[Any]], Any] | MetricReducer,
    numpy_dtype: Any,
) -> tuple[Any, Any]:
    """An Estimator `eval_metric_ops` entry computed by `reducer` from every batch's `metric`.

    Args:
        metric: a tensor, a flat list of tensors or a dict of str -> tensor, evaluated per batch.
        reducer: a `det.estimator.MetricReducer`, or a function of the list of all batches'
            values (numpy arrays) returning the metric.
        numpy_dtype: the metric's dtype (anything `np.dtype()` accepts).

    Returns:
        `(value_op, update_op)`, as `tf.compat.v1.metrics.*` return.
    """
    import numpy as np
    import tensorflow as tf

    if not isinstance(reducer, MetricReducer):
        if not callable(reducer):
            raise TypeError(
                "reducer must be a det.estimator.MetricReducer or a function of a list of values"
            )
        reducer = _SimpleMetricReducer(reducer)
    tensors, rebuild = _flatten(metric)
    dtype = np.dtype(numpy_dtype)
    state: dict[str, Any] = {"last": None, "seen": False}

    def update(*values: Any) -> None:
        state["last"] = reducer.accumulate(rebuild(list(values)))
        state["seen"] = True

    def value() -> Any:
        per_slot = [state["last"]] if state["seen"] else []
        return np.asarray(reducer.cross_slot_reduce(per_slot)).astype(dtype)

    update_op = tf.compat.v1.py_func(update, list(tensors), [], stateful=True)
    value_op = tf.compat.v1.py_func(value, [], tf.as_dtype(dtype), stateful=True)
    return value_op, update_op
