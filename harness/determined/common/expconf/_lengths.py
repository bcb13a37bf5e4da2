"""Training lengths in batches: the one conversion the Trial APIs (Keras, Estimator, PyTorch)
and the master share.

A length is `{batches: n}`, `{records: n}`, `{epochs: n}` or a bare int (batches, or the
searcher's own unit). As in Determined, a positive number of records is at least one batch:
`{records: 10}` with a global batch size of 32 trains one batch, never zero.
"""

from __future__ import annotations

import math
from typing import Any

from determined.common.expconf._access import length_of


class LengthError(ValueError):
    """A length that cannot be converted to batches (unknown unit, epochs without a size)."""


def records_to_batches(records: int, global_batch_size: int) -> int:
    """Whole global batches in `records`: `max(records // global_batch_size, 1)`; 0 for none.

    Args:
        records: a number of training records (examples).
        global_batch_size: records per batch, summed over all ranks.

    Returns:
        The number of batches that length trains.
    """
    if global_batch_size < 1:
        raise LengthError(
            f"global_batch_size must be at least 1 to count records, got {global_batch_size}"
        )
    if records <= 0:
        return 0
    return max(records // global_batch_size, 1)


def batches_per_epoch(records_per_epoch: int, global_batch_size: int) -> int:
    """Batches in one epoch: the last, partial batch counts (`ceil`), and an epoch is at least
    one batch.

    Args:
        records_per_epoch: records in one pass over the training data.
        global_batch_size: records per batch, summed over all ranks.

    Returns:
        The number of batches in an epoch.
    """
    return max(1, math.ceil(records_per_epoch / global_batch_size))


def length_to_batches(
    length: Any,
    *,
    global_batch_size: int,
    records_per_epoch: int | None = None,
    where: str = "length",
) -> int:
    """A config length in batches.

    Args:
        length: `{batches: n}`, `{records: n}`, `{epochs: n}` or an int (batches).
        global_batch_size: records per batch, summed over all ranks.
        records_per_epoch: records in an epoch; needed only for `{epochs: n}`.
        where: the config key the length came from, for error messages.

    Returns:
        The number of batches.

    Raises:
        LengthError: the length is malformed, or in epochs with no known epoch size.
    """
    try:
        unit, amount = length_of(length)
    except ValueError as exc:
        raise LengthError(f"{where}: {exc}") from None
    return unit_to_batches(
        unit,
        amount,
        global_batch_size=global_batch_size,
        records_per_epoch=records_per_epoch,
        where=where,
    )


def unit_to_batches(
    unit: str | None,
    amount: int,
    *,
    global_batch_size: int,
    records_per_epoch: int | None = None,
    where: str = "length",
) -> int:
    """`amount` of `unit` in batches.

    Args:
        unit: "batches", "records", "epochs", or None (batches).
        amount: how many of `unit`.
        global_batch_size: records per batch, summed over all ranks.
        records_per_epoch: records in an epoch; needed only for epochs.
        where: the config key the length came from, for error messages.

    Returns:
        The number of batches (records: Determined's `max(records // global_batch_size, 1)`).

    Raises:
        LengthError: an unknown unit, or epochs with no known epoch size.
    """
    if unit in (None, "batches"):
        return int(amount)
    if unit == "records":
        return records_to_batches(int(amount), global_batch_size)
    if unit == "epochs":
        if not records_per_epoch:
            raise LengthError(
                f"{where} is in epochs but the number of records per epoch is unknown: set "
                "records_per_epoch in the experiment config"
            )
        return int(amount) * batches_per_epoch(records_per_epoch, global_batch_size)
    raise LengthError(f"{where}: unknown length unit {unit!r} (use batches, records or epochs)")


def operation_unit(searcher: dict) -> str | None:
    """The unit the searcher's operation lengths are counted in, as the master hands them out.

    The key of `searcher.max_length` (`{epochs: 4}` -> "epochs"); without `max_length`, a 0.38
    `time_metric` of batches, records or epochs; otherwise None (a bare length counts batches).

    Args:
        searcher: the config's `searcher` section.

    Returns:
        "batches", "records", "epochs" or None.
    """
    max_length = searcher.get("max_length")
    if max_length is not None:
        return length_of(max_length)[0]
    time_metric = searcher.get("time_metric")
    return time_metric if time_metric in ("batches", "records", "epochs") else None


def batches_to_units(
    unit: str | None,
    batches: int,
    *,
    global_batch_size: int,
    records_per_epoch: int | None = None,
) -> float:
    """`batches` expressed in `unit` (for progress and searcher reports in the config's unit).

    Args:
        unit: "batches", "records", "epochs", or None (batches).
        batches: a number of global batches.
        global_batch_size: records per batch, summed over all ranks.
        records_per_epoch: records in an epoch (for epochs; unknown counts 1).

    Returns:
        The amount of `unit` those batches make (fractional for epochs).
    """
    if unit in (None, "batches"):
        return float(batches)
    if unit == "records":
        return float(batches * global_batch_size)
    return batches / batches_per_epoch(records_per_epoch or 1, global_batch_size)
