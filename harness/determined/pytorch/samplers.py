"""`det.pytorch.samplers`: building blocks for data loaders that repeat, shard, skip and shuffle.

Determined's `DataLoader` chains them itself (`adapt_batch_sampler`); use them directly when you
return a plain `torch.utils.data.DataLoader` (after
`context.experimental.disable_dataset_reproducibility_checks()`) and still want resumable,
sharded data. Same classes, arguments and lengths as Determined 0.38's module; the one
difference: the repeating samplers raise `ValueError` on an empty sampler instead of spinning
forever.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch.utils.data


def _repeat(sampler: Iterable[Any], what: str) -> Iterator[Any]:
    while True:
        empty = True
        for item in sampler:
            empty = False
            yield item
        if empty:
            raise ValueError(f"{what}: the wrapped sampler is empty; it cannot be repeated")


def _shard(sampler: Iterable[Any], num_workers: int, rank: int) -> Iterator[Any]:
    for i, item in enumerate(sampler):
        if i % num_workers == rank:
            yield item


_END = object()


def _skip(sampler: Iterable[Any], skip: int) -> Iterator[Any]:
    iterator = iter(sampler)
    for _ in range(skip):
        if next(iterator, _END) is _END:
            return
    yield from iterator


def _shard_len(total: int, num_workers: int, rank: int) -> int:
    """Items of `total` that rank `rank` of `num_workers` gets (round-robin)."""
    return total // num_workers + int(total % num_workers > rank)


class RepeatSampler(torch.utils.data.Sampler):
    """Yields the indices of `sampler` forever, pass after pass; `len()` is one pass."""

    def __init__(self, sampler: Any) -> None:
        self._sampler = sampler

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        return _repeat(self._sampler, "RepeatSampler")


class RepeatBatchSampler(torch.utils.data.BatchSampler):
    """Yields the batches of `batch_sampler` forever, pass after pass; `len()` is one pass."""

    def __init__(self, batch_sampler: Any) -> None:
        self.batch_sampler = batch_sampler

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        return _repeat(self.batch_sampler, "RepeatBatchSampler")


class DistributedSampler(torch.utils.data.Sampler):
    """Rank `rank` of `num_workers` gets items `rank`, `rank + num_workers`, ... of `sampler`.

    Unlike `torch.utils.data.DistributedSampler` it neither shuffles nor pads: it is one link of
    a chain, over a sampler whose length may change.
    """

    def __init__(self, sampler: Any, num_workers: int, rank: int) -> None:
        self._sampler = sampler
        self._num_workers = num_workers
        self._rank = rank

    def __len__(self) -> int:
        return _shard_len(len(self._sampler), self._num_workers, self._rank)

    def __iter__(self) -> Iterator[Any]:
        if self._num_workers == 1:
            return iter(self._sampler)
        return _shard(self._sampler, self._num_workers, self._rank)


class DistributedBatchSampler(torch.utils.data.BatchSampler):
    """Rank `rank` of `num_workers` gets batches `rank`, `rank + num_workers`, ... of `batch_sampler`.

    Over a finite batch sampler whose length does not divide by `num_workers`, lower ranks get one
    batch more: training repeats first (`RepeatBatchSampler`), and the training loop counts epochs
    by the chief's length, so ranks stay in step; validation does not need them to.

    Raises:
        ValueError: `rank` is not in `[0, num_workers)`.
    """

    def __init__(self, batch_sampler: Any, num_workers: int, rank: int) -> None:
        if rank < 0:
            raise ValueError("rank must be non-negative.")
        if num_workers < 1:
            raise ValueError("num_workers must be greater than zero.")
        if rank >= num_workers:
            raise ValueError("rank must be less than num_workers.")
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.rank = rank

    def __len__(self) -> int:
        return _shard_len(len(self.batch_sampler), self.num_workers, self.rank)

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers == 1:
            return iter(self.batch_sampler)
        return _shard(self.batch_sampler, self.num_workers, self.rank)


class SkipSampler(torch.utils.data.BatchSampler):
    """Drops the first `skip` indices of `sampler` (to resume); `len()` is the wrapped length.

    Prefer `SkipBatchSampler`: Determined counts trained batches, not records.
    """

    def __init__(self, sampler: Any, skip: int) -> None:
        self._sampler = sampler
        self._skip = skip

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        return _skip(self._sampler, self._skip)


class SkipBatchSampler(torch.utils.data.BatchSampler):
    """Drops the first `skip` batches of `batch_sampler` (already trained before a checkpoint).

    `len()` is the wrapped sampler's length (the skip applies once, over a repeating sampler).
    """

    def __init__(self, batch_sampler: Any, skip: int) -> None:
        self.batch_sampler = batch_sampler
        self.skip = skip
        self.length = len(batch_sampler)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        return _skip(self.batch_sampler, self.skip)


class ReproducibleShuffleSampler(torch.utils.data.Sampler):
    """Each pass yields the indices of `sampler` in an order drawn from a `seed`-ed generator.

    Shuffle before skipping and repeating (a shuffle of an infinite sampler never ends).
    """

    def __init__(self, sampler: Any, seed: int) -> None:
        self._sampler = sampler
        self._rng = np.random.RandomState(seed)

    def __iter__(self) -> Iterator[Any]:
        indices = list(self._sampler)
        self._rng.shuffle(indices)
        return iter(indices)

    def __len__(self) -> int:
        return len(self._sampler)


class ReproducibleShuffleBatchSampler(torch.utils.data.Sampler):
    """Each pass yields the batches of `batch_sampler` in an order drawn from a `seed`-ed generator.

    Prefer `ReproducibleShuffleSampler`: shuffling records varies what each batch holds too.
    """

    def __init__(self, batch_sampler: Any, seed: int) -> None:
        self._batch_sampler = batch_sampler
        self._rng = np.random.RandomState(seed)

    def __iter__(self) -> Iterator[Any]:
        batches = list(self._batch_sampler)
        order = self._rng.permutation(len(batches))
        return iter([batches[i] for i in order])

    def __len__(self) -> int:
        return len(self._batch_sampler)


__all__ = [
    "DistributedBatchSampler",
    "DistributedSampler",
    "RepeatBatchSampler",
    "RepeatSampler",
    "ReproducibleShuffleBatchSampler",
    "ReproducibleShuffleSampler",
    "SkipBatchSampler",
    "SkipSampler",
]
