"""Training lengths and periods: `Batch(n)` and `Epoch(n)`.

An int value means "every n" (n <= 0: every step); a container (list, tuple, set, range) means
"exactly at these step numbers".
"""

from __future__ import annotations

import collections.abc
import sys
from typing import Any

from determined.common import expconf

PeriodValue = int | collections.abc.Container


class TrainUnit:
    """A number of batches or epochs; subclassed by `Batch` and `Epoch`."""

    def __init__(self, value: PeriodValue) -> None:
        if isinstance(value, (bool, str, bytes)) or not isinstance(
            value, (int, collections.abc.Container)
        ):
            raise TypeError(
                f"{type(self).__name__}(value): expected an int or a container of ints, got {value!r}"
            )
        self.value = value

    def should_stop(self, step_num: int) -> bool:
        """Is `step_num` (batches or epochs completed, counting from 1) on this period?"""
        if isinstance(self.value, int):
            if self.value <= 0:
                return True
            return step_num > 0 and step_num % self.value == 0
        return step_num in self.value

    @staticmethod
    def _from_values(
        batches: int | None = None,
        records: int | None = None,
        epochs: int | None = None,
        global_batch_size: int | None = None,
    ) -> TrainUnit:
        """A config length object (`{batches: n}` ...) as a period; 0 means never (Determined)."""
        given = [
            (k, v)
            for k, v in (("batches", batches), ("records", records), ("epochs", epochs))
            if v is not None
        ]
        if len(given) != 1:
            raise ValueError(
                f"a length needs exactly one of batches, records, epochs; got {dict(given)}"
            )
        unit, amount = given[0]
        if unit == "epochs":
            return Epoch(amount if amount > 0 else sys.maxsize)
        if unit == "records":
            if not global_batch_size:
                raise ValueError(
                    f"a length of {{records: {amount}}} needs hyperparameter global_batch_size to be "
                    "converted to batches"
                )
            # Determined's conversion: a positive number of records is at least one batch.
            amount = expconf.records_to_batches(amount, global_batch_size)
        return Batch(amount if amount > 0 else sys.maxsize)

    @staticmethod
    def _from_length(length: Any, global_batch_size: int | None = None) -> TrainUnit:
        """`searcher.max_length`-style value: an int (batches) or a one-key length dict."""
        if isinstance(length, int) and not isinstance(length, bool):
            return Batch(length)
        if isinstance(length, dict):
            return TrainUnit._from_values(**length, global_batch_size=global_batch_size)
        raise ValueError(
            f"not a length: {length!r} (expected e.g. {{batches: 100}} or {{epochs: 2}})"
        )

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self.value)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


class Batch(TrainUnit):
    """Counted in (global) batches: one optimizer-loop step of every rank."""


class Epoch(TrainUnit):
    """Counted in epochs; only checked on the last batch of an epoch."""


def never() -> Batch:
    return Batch(sys.maxsize)
