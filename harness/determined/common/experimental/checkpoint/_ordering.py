"""The order of a trial's or an experiment's checkpoints: Determined's `list_checkpoints` sort,
made here (the master has no sorting), and the one rule by which `Trial.select_checkpoint` and
`det trial download` pick the latest or the best checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from determined.common.experimental import _util
from determined.common.experimental.checkpoint._checkpoint import Checkpoint, CheckpointSortBy


def _checkpoint_sort_value(checkpoint: Checkpoint, sort_by: CheckpointSortBy | str) -> Any:
    if isinstance(sort_by, str):
        training = checkpoint.training
        metrics = (training.validation_metrics.get("avgMetrics") or {}) if training else {}
        value = metrics.get(sort_by)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if sort_by is CheckpointSortBy.UUID:
        return checkpoint.uuid
    if sort_by is CheckpointSortBy.TRIAL_ID:
        return checkpoint.training.trial_id if checkpoint.training else None
    if sort_by is CheckpointSortBy.BATCH_NUMBER:
        return checkpoint.training.steps_completed if checkpoint.training else None
    if sort_by is CheckpointSortBy.END_TIME:
        return checkpoint.report_time
    if sort_by is CheckpointSortBy.STATE:
        return checkpoint.state.value if checkpoint.state else None
    raise ValueError(f"cannot sort checkpoints by {sort_by!r}")


def sort_checkpoints(
    checkpoints: list[Checkpoint],
    sort_by: CheckpointSortBy | str | None,
    order_by: _util.OrderBy | None,
    searcher: dict[str, Any],
    max_results: int | None = None,
) -> list[Checkpoint]:
    """Determined's order of `list_checkpoints` answers, made here (the master has no sorting).

    Args:
        checkpoints: the checkpoints, in the master's (report) order.
        sort_by: a `CheckpointSortBy` or a validation metric name; None with `order_by` None
            sorts by the searcher metric, best first.
        order_by: ascending or descending; set together with `sort_by`.
        searcher: the experiment's `{metric, smaller_is_better}`.
        max_results: keep only the first this many.

    Returns:
        The sorted list; checkpoints without the sort value come last either way.

    Raises:
        AssertionError: only one of `sort_by` and `order_by` is set (as in Determined).
        ValueError: `sort_by` is neither a `CheckpointSortBy` nor a string, or it sorts by the
            searcher metric and the experiment has none.
    """
    if (sort_by is None) != (order_by is None):
        raise AssertionError("sort_by and order_by must be either both set, or neither.")
    if sort_by is not None and not isinstance(sort_by, (CheckpointSortBy, str)):
        raise ValueError("sort_by must be of type CheckpointSortBy or str")
    if sort_by is None or sort_by is CheckpointSortBy.SEARCHER_METRIC:
        metric = searcher.get("metric")
        if not isinstance(metric, str) or not metric:
            raise ValueError(
                "the experiment has no searcher.metric to sort checkpoints by; pass sort_by"
            )
        if order_by is None:
            smaller = searcher.get("smaller_is_better", True)
            order_by = _util.OrderBy.ASC if smaller is not False else _util.OrderBy.DESC
        sort_by = metric
    assert sort_by is not None and order_by is not None  # given together, or set above
    descending = order_by.value == _util.OrderBy.DESC.value
    key_of = sort_by
    ordered = sorted(
        checkpoints,
        key=lambda c: _util.sort_key_nulls_last(_checkpoint_sort_value(c, key_of), descending),
        reverse=descending,
    )
    return ordered[:max_results] if max_results else ordered


def metric_order(
    sort_by: str | None, smaller_is_better: bool | None, searcher: Callable[[], dict[str, Any]]
) -> tuple[str | None, _util.OrderBy | None]:
    """(sort_by, order_by) of Determined's `top_checkpoint(sort_by, smaller_is_better)`: both
    None without `sort_by` (then the searcher metric sorts); `searcher` (called only when the
    direction is not given) gives the default direction, the experiment's `smaller_is_better`."""
    if sort_by is None:
        return None, None
    if smaller_is_better is None:
        smaller_is_better = searcher().get("smaller_is_better", True) is not False
    return sort_by, _util.OrderBy.ASC if smaller_is_better else _util.OrderBy.DESC


def rank_checkpoints(
    checkpoints: list[Checkpoint],
    *,
    latest: bool,
    sort_by: str | None,
    smaller_is_better: bool | None,
    searcher: Callable[[], dict[str, Any]],
) -> list[Checkpoint]:
    """`checkpoints` in the order of the one meant first: `Trial.select_checkpoint`'s rule, which
    `det trial download --latest/--best` follows too.

    Args:
        checkpoints: a trial's checkpoints (the caller picks which states count).
        latest: the most steps first; else the best first.
        sort_by: for the best: this validation metric; default the searcher metric.
        smaller_is_better: the direction for `sort_by`; default the searcher's.
        searcher: the experiment's searcher config (`metric`, `smaller_is_better`), called only
            when needed.

    Returns:
        The ordered list; for the best, checkpoints without the metric come last.

    Raises:
        ValueError: the best by the searcher metric, and the experiment has none.
    """
    if latest:
        return sort_checkpoints(checkpoints, CheckpointSortBy.BATCH_NUMBER, _util.OrderBy.DESC, {})
    sort, order = metric_order(sort_by, smaller_is_better, searcher)
    return sort_checkpoints(checkpoints, sort, order, searcher() if sort is None else {})


def metric_value(checkpoint: Checkpoint, metric: str) -> float | int | None:
    """The checkpoint's numeric validation `metric` (None without one): what the best sorts by."""
    value: float | int | None = _checkpoint_sort_value(checkpoint, metric)
    return value
