"""How per-batch metrics become one number: `Reducer` (built in) and `MetricReducer` (custom)."""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class Reducer(enum.Enum):
    """Built-in reductions of per-batch validation metrics (same values as Determined)."""

    AVG = 1
    SUM = 2
    MAX = 3
    MIN = 4


class MetricReducer(abc.ABC):
    """A custom reduction, registered with `context.wrap_reducer(reducer, name=...)`.

    You feed it yourself (conventionally with an `update(...)` method of your own signature,
    called from `train_batch`/`evaluate_batch`); Determined calls `reset()` before each round,
    `per_slot_reduce()` on every rank afterwards, and `cross_slot_reduce(per_slot_values)` on
    every rank with the values of all ranks in rank order.

    A round is a span of training batches whose metrics are reported together (with
    `for_training`) or one validation pass through `evaluate_batch` (with `for_validation`).
    """

    @abc.abstractmethod
    def reset(self) -> None:
        """Clear what was accumulated; called on every rank before each round.

        A round is a span of training batches reported together, or one validation pass (see
        the class docstring). Also set up the state here: it is called before the first round.
        """

    @abc.abstractmethod
    def per_slot_reduce(self) -> Any:
        """Reduce what this rank accumulated in the round; called on every rank after it.

        Returns:
            Any picklable value; it is gathered from all ranks and passed to
            `cross_slot_reduce`.
        """

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        """Combine the values of all ranks into the metric; called on every rank after a round.

        Args:
            per_slot_metrics: what `per_slot_reduce()` returned on each rank, in rank order
                (one item in a single process); every rank gets the same list.

        Returns:
            For a reducer wrapped with a `name`, the metric's value (a number, or a tensor or
            array, turned into a Python number or list). Without a name, a dict of metric
            name to value, merged into the metrics (anything else raises a ValueError).
        """


class _FunctionReducer(MetricReducer):
    """What `wrap_reducer(fn)` returns for a plain function (Determined's simple API): call
    `update(value)` from `train_batch`/`evaluate_batch`; after a round `fn` gets every value
    of every rank in one flat list, ranks interleaved batch by batch (each rank's k-th value
    before any rank's (k+1)-th: the order of a sharded loader's batches when each rank
    updates once per batch)."""

    def __init__(self, fn: Callable[[list[Any]], Any]) -> None:
        self.fn = fn
        self.values: list[Any] = []

    def update(self, value: Any) -> None:
        """Add one value (e.g. a batch's `(y_true, y_score)`) to this round's."""
        self.values.append(value)

    def reset(self) -> None:
        self.values = []

    def per_slot_reduce(self) -> Any:
        return self.values

    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        longest = max((len(values) for values in per_slot_metrics), default=0)
        interleaved = [
            values[index]
            for index in range(longest)
            for values in per_slot_metrics
            if index < len(values)
        ]
        return self.fn(interleaved)


class _WrappedReducer:
    def __init__(
        self, reducer: MetricReducer, name: str | None, for_training: bool, for_validation: bool
    ):
        self.reducer = reducer
        self.name = name
        self.for_training = for_training
        self.for_validation = for_validation


def to_number(value: Any) -> Any:
    """A tensor/array/number as a plain Python number (or list for non-scalars)."""
    if type(value) is float or type(value) is int:  # the common case, first: this runs per batch
        return value
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        return value.item() if value.numel() == 1 else value.numpy().tolist()
    if isinstance(value, np.ndarray):
        return value.item() if value.size == 1 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _reduce(reducer: Reducer, values: Sequence[Any], weights: Sequence[float] | None = None) -> Any:
    if not values:
        raise ValueError("cannot reduce an empty list of metric values")
    if reducer is Reducer.AVG:
        if weights is not None and sum(weights) > 0:
            return float(np.average(np.asarray(values, dtype=float), axis=0, weights=weights))
        return float(np.mean(np.asarray(values, dtype=float), axis=0))
    if reducer is Reducer.SUM:
        return to_number(np.sum(np.asarray(values), axis=0))
    if reducer is Reducer.MAX:
        return to_number(np.max(np.asarray(values), axis=0))
    if reducer is Reducer.MIN:
        return to_number(np.min(np.asarray(values), axis=0))
    raise ValueError(f"unknown reducer {reducer!r}; use det.pytorch.Reducer.AVG/SUM/MAX/MIN")


def reducer_for(reducers: Any, name: str) -> Reducer:
    """`evaluation_reducer()` may return one Reducer for all metrics or a dict name -> Reducer."""
    if isinstance(reducers, Reducer):
        return reducers
    if isinstance(reducers, dict):
        if name not in reducers:
            raise ValueError(
                f"evaluation_reducer() returned a dict without metric {name!r}: give a Reducer for "
                f"every metric evaluate_batch returns (got keys {sorted(reducers)})"
            )
        return Reducer(reducers[name])
    raise TypeError(
        f"evaluation_reducer() must return a Reducer or a dict of them, got {reducers!r}"
    )


def per_slot_reduce(batch_metrics: list[dict[str, Any]], reducers: Any) -> dict[str, Any]:
    """Reduce one rank's per-batch metric dicts key by key."""
    keys: list[str] = []
    for metrics in batch_metrics:
        keys.extend(k for k in metrics if k not in keys)
    return {
        key: _reduce(
            reducer_for(reducers, key), [to_number(m[key]) for m in batch_metrics if key in m]
        )
        for key in keys
    }


def cross_slot_reduce(
    per_slot: list[dict[str, Any]], num_batches: list[int], reducers: Any
) -> dict[str, Any]:
    """Combine every rank's reduced metrics; AVG is weighted by each rank's batch count."""
    keys: list[str] = []
    for metrics in per_slot:
        keys.extend(k for k in metrics if k not in keys)
    out: dict[str, Any] = {}
    for key in keys:
        ranks = [i for i, m in enumerate(per_slot) if key in m]
        out[key] = _reduce(
            reducer_for(reducers, key),
            [per_slot[i][key] for i in ranks],
            [num_batches[i] for i in ranks],
        )
    return out
