"""Config lengths in batches, for one trial: the config's own lengths, searcher operations, and
progress back in the searcher's unit.

The conversion itself is `determined.common.expconf.unit_to_batches` (shared with the master);
this class only knows what a trial adds: its global batch size and how long its epoch is.
"""

from __future__ import annotations

from typing import Any

from determined import errors
from determined.common import expconf


class Lengths:
    """Converts this trial's lengths (batches, records, epochs) into batches.

    Args:
        config: the (expanded) experiment config.
        global_batch_size: records per batch, summed over all ranks.
        records_per_epoch: records in an epoch when the data says so (arrays); the config's
            `records_per_epoch` wins over it.
        batches_per_epoch: batches in an epoch when the data loader says so (PyTorch: an epoch
            is one pass of the loader); wins over both records counts.
        epoch_hint: added to the error when a length is in epochs and the epoch size is unknown
            (says what the framework would need to know it).
    """

    def __init__(
        self,
        config: dict,
        global_batch_size: int,
        *,
        records_per_epoch: int | None = None,
        batches_per_epoch: int | None = None,
        epoch_hint: str = "",
    ) -> None:
        self.config = config
        self.global_batch_size = global_batch_size
        self.records_per_epoch = int(config.get("records_per_epoch") or 0) or records_per_epoch
        self.batches_per_epoch = batches_per_epoch
        self.epoch_hint = epoch_hint

    def batches(self, unit: str | None, amount: int, where: str) -> int:
        """`amount` of `unit` in batches.

        Args:
            unit: "batches", "records", "epochs", or None (batches).
            amount: how many of `unit`.
            where: the config key (or "searcher operation") the length came from.

        Returns:
            The number of batches; records use Determined's `max(records // gbs, 1)`.

        Raises:
            errors.InvalidExperimentException: epochs with no known epoch size, or an unknown unit.
        """
        if unit == "epochs" and self.batches_per_epoch:
            return int(amount) * self.batches_per_epoch
        try:
            return expconf.unit_to_batches(
                unit,
                amount,
                global_batch_size=self.global_batch_size,
                records_per_epoch=self.records_per_epoch,
                where=where,
            )
        except expconf.LengthError as exc:
            hint = self.epoch_hint if unit == "epochs" else ""
            raise errors.InvalidExperimentException(f"{exc}{hint}") from None

    def length(self, length: Any, where: str) -> int:
        """A config length (`{batches: n}`, `{records: n}`, `{epochs: n}` or an int) in batches."""
        try:
            unit, amount = expconf.length_of(length)
        except ValueError as exc:
            raise errors.InvalidExperimentException(f"{where}: {exc}") from None
        return self.batches(unit, amount, where)

    def of(self, key: str) -> int:
        """The config's top-level length `key` (e.g. min_validation_period) in batches; 0 if unset."""
        length = self.config.get(key)
        return 0 if length is None else self.length(length, key)

    def searcher_unit(self) -> str | None:
        """The unit searcher operation lengths are counted in (see `expconf.operation_unit`)."""
        return expconf.operation_unit(self.config.get("searcher") or {})

    def operation(self, length: int) -> int:
        """A searcher operation's length (in `searcher_unit()`) in batches."""
        return self.batches(self.searcher_unit(), int(length), "searcher operation")

    def max_length(self) -> int:
        """`searcher.max_length` in batches: how long a local run trains.

        Raises:
            errors.InvalidExperimentException: the config has no `searcher.max_length`.
        """
        searcher = self.config.get("searcher") or {}
        if searcher.get("max_length") is None:
            raise errors.InvalidExperimentException(
                "searcher.max_length is required to train locally (e.g. max_length: {batches: 500})"
            )
        return self.length(searcher["max_length"], "searcher.max_length")

    def to_units(self, unit: str | None, batches: int) -> float:
        """`batches` in `unit` (for progress reported in the searcher's unit)."""
        if unit == "epochs" and self.batches_per_epoch:
            return batches / self.batches_per_epoch
        return expconf.batches_to_units(
            unit,
            batches,
            global_batch_size=self.global_batch_size,
            records_per_epoch=self.records_per_epoch,
        )
