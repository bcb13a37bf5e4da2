"""`det.pytorch.DataLoader` and the batch samplers that make training resumable and shardable.

The torch loader is only built by `get_data_loader(repeat, skip, num_replicas, rank)`, which
wraps the batch sampler as: base -> repeat (training) -> shard across ranks -> skip (resume).
Shuffling uses a seed fixed when the DataLoader is constructed, with a fresh permutation per
pass (seed + pass number), so "skip the first N batches" lands exactly where a run stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeAlias

import numpy as np
import torch
import torch.utils.data

from determined.pytorch import samplers

# What a batch of training or validation data is: a tensor, a sequence of tensors, or a dict of
# them (Determined's `det.pytorch.TorchData`, for type hints in `train_batch` / `evaluate_batch`).
TorchData: TypeAlias = dict[str, torch.Tensor] | Sequence[torch.Tensor] | torch.Tensor


class _PassShuffleSampler(torch.utils.data.Sampler):
    """`DataLoader(shuffle=True)`'s sampler: a new permutation on every pass, determined by
    `seed` and the pass number (so a resumed run sees the permutations of the run it continues)."""

    def __init__(self, data_source: Any, seed: int) -> None:
        self._num_samples = len(data_source)
        self._seed = seed
        self._passes = 0

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self._seed + self._passes)
        self._passes += 1
        return iter(torch.randperm(self._num_samples, generator=generator).tolist())

    def __len__(self) -> int:
        return self._num_samples


def adapt_batch_sampler(
    batch_sampler: Any, repeat: bool = False, skip: int = 0, num_replicas: int = 1, rank: int = 0
) -> Any:
    """`batch_sampler` repeated (training), sharded across `num_replicas` ranks, then with its
    first `skip` (already trained) batches of this rank dropped, in that order.

    Args:
        batch_sampler: the data loader's batch sampler.
        repeat: wrap it in `samplers.RepeatBatchSampler` (endless training data).
        skip: batches of this rank to drop (`samplers.SkipBatchSampler`), to resume.
        num_replicas: ranks to shard across (`samplers.DistributedBatchSampler`).
        rank: this rank.

    Returns:
        The wrapped batch sampler.
    """
    if repeat:
        batch_sampler = samplers.RepeatBatchSampler(batch_sampler)
    if num_replicas > 1:
        batch_sampler = samplers.DistributedBatchSampler(batch_sampler, num_replicas, rank)
    if skip > 0:
        batch_sampler = samplers.SkipBatchSampler(batch_sampler, skip)
    return batch_sampler


def _reject_iterable(dataset: Any) -> None:
    if isinstance(dataset, torch.utils.data.IterableDataset):
        raise ValueError(
            "det.pytorch.DataLoader does not accept an IterableDataset: Determined must index the "
            "dataset to shard it across ranks and to skip already-trained batches on resume. Use a "
            "map-style Dataset (with __getitem__ and __len__), or return a torch.utils.data.DataLoader "
            "from build_*_data_loader and handle sharding yourself"
        )


class DataLoader:
    """Same arguments as `torch.utils.data.DataLoader`; Determined builds the torch loader.

    Return it from `build_training_data_loader` / `build_validation_data_loader`: Determined
    then builds the torch loader with `get_data_loader`, sharded across ranks and, for
    training, repeated and positioned after the batches already trained. With `shuffle=True`
    the shuffle seed is drawn once, here (from torch's random generator, seeded with the trial
    seed on the master, or from `generator`), and each pass uses a new permutation.

    Args:
        dataset: a map-style dataset (with `__getitem__` and `__len__`).
        batch_size: records per batch; use `context.get_per_slot_batch_size()`. None (no
            batching) is not supported.
        shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, drop_last,
            timeout, worker_init_fn, multiprocessing_context, generator, prefetch_factor,
            persistent_workers: as for `torch.utils.data.DataLoader`.

    Raises:
        ValueError: `dataset` is an `IterableDataset`; `batch_sampler` is combined with
            `batch_size`, `shuffle`, `sampler` or `drop_last`; `sampler` with `shuffle=True`;
            or `batch_size` is None without a `batch_sampler`.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable | None = None,
        multiprocessing_context: Any = None,
        generator: torch.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
    ) -> None:
        _reject_iterable(dataset)
        if batch_sampler is not None and (
            batch_size != 1 or shuffle or sampler is not None or drop_last
        ):
            raise ValueError(
                "DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle, sampler and drop_last"
            )
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler is mutually exclusive with shuffle=True")
        if batch_sampler is None and batch_size is None:
            raise ValueError(
                "DataLoader: batch_size=None (no batching) is not supported; give a batch size"
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.drop_last = drop_last
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        # Fixed now (from the trial-seeded torch RNG or the given generator) so a resumed run
        # sees the same permutations as the run it continues.
        self._shuffle_seed = (
            int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item()) if shuffle else 0
        )

    def _base_batch_sampler(self) -> Any:
        if self.batch_sampler is not None:
            return self.batch_sampler
        if self.sampler is not None:
            sampler = self.sampler
        elif self.shuffle:
            sampler = _PassShuffleSampler(self.dataset, self._shuffle_seed)
        else:
            sampler = torch.utils.data.SequentialSampler(self.dataset)
        assert self.batch_size is not None  # __init__ refuses neither batch_size nor batch_sampler
        return torch.utils.data.BatchSampler(sampler, self.batch_size, self.drop_last)

    def get_data_loader(
        self, repeat: bool = False, skip: int = 0, num_replicas: int = 1, rank: int = 0
    ) -> torch.utils.data.DataLoader:
        """Build the torch DataLoader to iterate; the trainer calls it, you rarely need to.

        The batch sampler (from `batch_sampler`, or `sampler`/`shuffle` with `batch_size`) is
        repeated, then sharded, then has its first batches skipped, in that order (see
        `adapt_batch_sampler`). Without a `generator`, the loader gets one seeded with this
        DataLoader's fixed seed, so worker seeds do not depend on torch's global random state.

        Args:
            repeat: loop over the data without end (training).
            skip: batches of this rank's shard to drop from the start (to resume).
            num_replicas: the number of ranks to shard across; rank `r` gets batches `r`,
                `r + num_replicas`, ...
            rank: this process's rank.

        Returns:
            A `torch.utils.data.DataLoader` with that batch sampler and this DataLoader's other
            arguments (workers, collate_fn, pin_memory, ...).
        """
        batch_sampler = adapt_batch_sampler(
            self._base_batch_sampler(), repeat, skip, num_replicas, rank
        )
        generator = self.generator
        if generator is None:
            # Without a generator, torch draws each iterator's worker base seed from the global
            # RNG, so starting a loader mid-run (resume, validation) would shift everyone's
            # random stream and break exact resumption.
            generator = torch.Generator()
            generator.manual_seed(self._shuffle_seed)
        return torch.utils.data.DataLoader(
            self.dataset,
            batch_sampler=batch_sampler,
            num_workers=self.num_workers,
            collate_fn=self.collate_fn,
            pin_memory=self.pin_memory,
            timeout=self.timeout,
            worker_init_fn=self.worker_init_fn,
            multiprocessing_context=self.multiprocessing_context,
            generator=generator,
            prefetch_factor=self.prefetch_factor,
            persistent_workers=self.persistent_workers,
        )

    def __len__(self) -> int:
        """Batches in one pass over the whole dataset (before sharding)."""
        return len(self._base_batch_sampler())


def data_length(data: Any) -> int:
    """The batch size of a batch: the length of its first tensor-like leaf."""
    if isinstance(data, (torch.Tensor, np.ndarray)):
        return len(data)
    if isinstance(data, dict):
        return data_length(next(iter(data.values())))
    if isinstance(data, (list, tuple)) and data:
        return data_length(data[0])
    raise TypeError(
        f"cannot tell the length of a batch of type {type(data).__name__}: override "
        "get_batch_length(batch) in your PyTorchTrial"
    )


def to_device(data: Any, device: torch.device) -> Any:
    """Move every tensor in a (nested) dict/list/tuple to `device`."""
    if isinstance(data, torch.Tensor):
        # `is_cpu` is a plain flag; `.to()` goes through the dispatcher (~0.5 µs a tensor, on
        # every batch) even when there is nothing to move.
        if data.is_cpu and device.type == "cpu":
            return data
        return data.to(device)
    kind = type(data)
    if kind is tuple or kind is list:  # the usual batch, first (runs on every batch)
        return kind([to_device(v, device) for v in data])
    if isinstance(data, dict):
        return {k: to_device(v, device) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return kind(*(to_device(v, device) for v in data))
    if isinstance(data, (list, tuple)):
        return kind(to_device(v, device) for v in data)
    return data


def repeat_and_skip(loader: Any, skip: int) -> Iterator[Any]:
    """A plain torch DataLoader, repeated forever, with its first `skip` batches read and dropped."""
    seen = 0
    while True:
        empty = True
        for batch in loader:
            empty = False
            if seen >= skip:
                yield batch
            seen += 1
        if empty:
            raise ValueError(
                "the training data loader yields no batches: cannot repeat an empty dataset"
            )


def batches_per_epoch(loader: Any) -> int:
    try:
        return len(loader)
    except TypeError:
        raise ValueError(
            "the training data loader has no len(): Determined needs it to count epochs"
        ) from None


__all__: Sequence[str] = [
    "DataLoader",
    "TorchData",
    "adapt_batch_sampler",
    "data_length",
    "to_device",
]
