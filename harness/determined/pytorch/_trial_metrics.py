"""Turning what a PyTorch trial returns into metric values for the training loop's reports.

`train_batch` returns tensors; reading a tensor's value waits for the device, so one chunk's
batch metrics are kept as (detached) tensors and read together at the report. Custom reducers'
per-rank values are combined here too.
"""

from __future__ import annotations

from typing import Any

import torch

from determined.pytorch._reducer import _WrappedReducer, to_number


def training_metrics_dict(metrics: Any) -> dict[str, Any]:
    """One batch's metrics, tensors kept (detached) on their device: reading a tensor's value
    waits for the device, so that happens once per report (`metric_values`), not per batch."""
    if isinstance(metrics, torch.Tensor):
        return {"loss": metrics.detach()}
    if not isinstance(metrics, dict):
        raise TypeError(
            f"train_batch must return a dict of metrics (or the loss tensor), got {type(metrics).__name__}"
        )
    return {
        k: v.detach() if isinstance(v, torch.Tensor) else to_number(v) for k, v in metrics.items()
    }


def metric_values(batch_metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`batch_metrics` with every tensor replaced by its value (numbers, lists for non-scalars).

    A metric whose values are scalar tensors of one dtype and device is read with one
    `torch.stack(...).tolist()`, so the device is waited for once per metric, not per batch.
    This runs at every report (100 batches by default): per-tensor checks here cost ~2 µs a
    batch, a measurable share of a small model's step, so the checks are the cheap ones
    (`dtype`, `dim`) and a device mismatch is left to `torch.stack` to find.
    """
    if not any(isinstance(v, torch.Tensor) for m in batch_metrics for v in m.values()):
        return batch_metrics
    keys: list[str] = []
    for metrics in batch_metrics:
        keys.extend(k for k in metrics if k not in keys)
    read: dict[str, list[Any]] = {}
    for key in keys:
        values = [m[key] for m in batch_metrics if key in m]
        scalars = _scalar_tensor_values(values)
        read[key] = scalars if scalars is not None else [to_number(v) for v in values]
    if len(keys) == 1 and len(read[keys[0]]) == len(batch_metrics):  # the usual case: one metric
        key = keys[0]
        return [{key: value} for value in read[key]]
    positions = {key: iter(values) for key, values in read.items()}
    return [{k: next(positions[k]) for k in metrics} for metrics in batch_metrics]


def _scalar_tensor_values(values: list[Any]) -> list[Any] | None:
    """The values of `values` read at once when they are one-element tensors of one dtype on
    one device; None otherwise."""
    first = values[0] if values else None
    if not isinstance(first, torch.Tensor):
        return None
    dtype = first.dtype
    for value in values:
        if not isinstance(value, torch.Tensor) or value.dtype is not dtype or value.dim() > 1:
            return None
    try:
        stacked = torch.stack(values) if first.dim() == 0 else torch.cat(values)
    except RuntimeError:  # different devices (or shapes): read one by one
        return None
    if stacked.dim() != 1 or stacked.shape[0] != len(values):
        return None  # some of the 1-d tensors held more than one element
    return stacked.cpu().tolist()


def cross_slot_custom(
    reducers: list[_WrappedReducer], per_rank: list[list[Any]], for_training: bool
) -> dict[str, Any]:
    """The metrics of the custom reducers (`context.wrap_reducer`) for training or validation,
    from every rank's `per_slot_reduce()` values (`per_rank[rank][i]` for the i-th reducer)."""
    wrapped = [r for r in reducers if (r.for_training if for_training else r.for_validation)]
    out: dict[str, Any] = {}
    for i, reducer in enumerate(wrapped):
        value = reducer.reducer.cross_slot_reduce([values[i] for values in per_rank])
        if reducer.name is not None:
            out[reducer.name] = to_number(value)
        elif isinstance(value, dict):
            out.update({k: to_number(v) for k, v in value.items()})
        else:
            raise ValueError(
                f"{type(reducer.reducer).__name__}.cross_slot_reduce returned {type(value).__name__}: a "
                "reducer wrapped without name= must return a dict of metrics"
            )
    return out
