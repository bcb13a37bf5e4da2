"""The searcher metric among a validation's metrics, and the checkpoint policy that compares it."""

from __future__ import annotations

import enum
import math
from typing import Any

from determined import errors


class MissingSearcherMetric(errors.InvalidExperimentException, RuntimeError):
    """`searcher.metric` is not among a validation's metrics.

    Also a RuntimeError, which is what PyTorch's Trainer has always raised for it.
    """


class CheckpointPolicy(str, enum.Enum):
    """When a validation also checkpoints (the config's `checkpoint_policy`)."""

    NONE = "none"
    ALL = "all"
    BEST = "best"


def searcher_metric_value(
    metrics: dict,
    name: str | None,
    *,
    default: str = "loss",
    forms: tuple[str, ...] = ("{}",),
    hint: str = "",
) -> float:
    """The value of the searcher's metric among validation `metrics`.

    Args:
        metrics: a validation's metrics.
        name: `searcher.metric`; None: `default`, else the first metric (0.0 if there is none).
        default: the metric used when the config names none.
        forms: how `name` may appear, e.g. `("{}", "val_{}")` (Keras prefixes "val_").
        hint: appended to the error (how this framework names validation metrics).

    Returns:
        The metric's value as a float.

    Raises:
        MissingSearcherMetric: `name` is not among `metrics`; the message names it and lists
            the metrics that were reported.
    """
    if name is None:
        return float(metrics.get(default, next(iter(metrics.values()), 0.0)))
    for form in forms:
        candidate = form.format(name)
        if candidate in metrics:
            return float(metrics[candidate])
    reported = ", ".join(sorted(metrics)) or "none"
    raise MissingSearcherMetric(
        f"searcher.metric: {name!r} is not among the validation metrics ({reported}); "
        f"name one of them{f' ({hint})' if hint else ''}"
    )


def is_better(value: Any, best: float | None, smaller_is_better: bool) -> bool:
    """Is `value` better than the experiment's `best` so far (None: nothing yet)? NaN never is.

    Args:
        value: the searcher metric of a validation.
        best: the experiment's best so far, or None.
        smaller_is_better: the config's `searcher.smaller_is_better`.

    Returns:
        True when a "best" checkpoint policy should checkpoint.
    """
    value = float(value)
    if math.isnan(value):
        return False
    if best is None:
        return True
    return value < best if smaller_is_better else value > best
