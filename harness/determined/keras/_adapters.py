"""The data types and adapters Determined's `determined.keras` exported (0.13-0.38).

* `ArrayLike`, `InputData`: type aliases (what `build_training_data_loader` may return);
* `_ArrayLikeAdapter`: arrays as a Sequence of batches (the 0.13 Native examples import it);
* `_adapt_data_from_data_loader`, `_adapt_data_from_fit_args`: what a data loader returned, or
  `fit()`'s `x`/`y`/`sample_weight`, as one data object (Determined's private names, which its
  tests and some users' code call);
* `SequenceAdapter`: a Sequence plus loader settings (deprecated in Determined since 0.13,
  replaced by `context.configure_fit()`); the managed loop unwraps it and reads the Sequence
  itself, so its `workers`/`use_multiprocessing`/`max_queue_size` have no effect.

Bad inputs raise what Determined's raised: data of the wrong kind
`errors.InvalidDataTypeException`, lengths that do not fit `DataCheckFailed`, which is both
Determined's `check.CheckFailedError` (its adapters checked with `determined.common.check`) and our
`errors.InvalidExperimentException`.

The Sequence base is what `tf.keras` is in this process: `keras.utils.PyDataset` (Keras 3), or
`tf_keras.utils.Sequence` under `TF_USE_LEGACY_KERAS=1`, so an adapter can also be handed to a
plain `fit()` of that Keras.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from determined import errors
from determined.common import check
from determined.keras import _flavor

_KERAS = _flavor.default_module()
_SEQUENCE_BASE: type = (
    _KERAS.utils.PyDataset if hasattr(_KERAS.utils, "PyDataset") else _KERAS.utils.Sequence
)

ArrayLike = np.ndarray | list | dict
"""A numpy array, or a list or dict of them (a model with several inputs or outputs)."""


class DataCheckFailed(check.CheckFailedError, errors.InvalidExperimentException):
    """Keras data whose sizes do not fit (Determined raised `check.CheckFailedError`)."""


_ARRAYS_WANTED = (
    "data that is not a tf.data.Dataset or a keras.utils.Sequence/PyDataset must be a numpy "
    "array or a list/dict of numpy arrays (as TFKerasTrial.build_training_data_loader() "
    "documents)"
)


def _is_array_like(data: Any) -> bool:
    if isinstance(data, np.ndarray):
        return True
    if isinstance(data, (list, tuple)):
        return bool(data) and all(isinstance(a, np.ndarray) for a in data)
    if isinstance(data, dict):
        return bool(data) and all(isinstance(a, np.ndarray) for a in data.values())
    return False


def _length(data: Any) -> int:
    if isinstance(data, np.ndarray):
        return len(data)
    values = list(data.values()) if isinstance(data, dict) else list(data)
    lengths = {len(a) for a in values}
    if len(lengths) != 1:
        raise DataCheckFailed(f"the arrays of one input have different lengths {sorted(lengths)}")
    return lengths.pop()


def _rows(data: Any, start: int, end: int) -> Any:
    if isinstance(data, np.ndarray):
        return data[start:end]
    if isinstance(data, dict):
        return {name: array[start:end] for name, array in data.items()}
    return [array[start:end] for array in data]


class _ArrayLikeAdapter(_SEQUENCE_BASE):
    """Arrays as a Sequence of batches, in order (batch `i` is rows `i*batch_size ...`).

    Args:
        x: the inputs: a numpy array, or a list/dict of them.
        y: the targets, the same kinds.
        batch_size: records per batch.
        sample_weights: one weight per record, or None.
        drop_leftovers: leave out the last, partial batch.
    """

    def __init__(
        self,
        x: ArrayLike,
        y: ArrayLike,
        batch_size: int,
        sample_weights: np.ndarray | None = None,
        drop_leftovers: bool = False,
    ) -> None:
        super().__init__()
        for name, data in (("x", x), ("y", y)):
            if not _is_array_like(data):
                raise errors.InvalidDataTypeException(
                    type(data), f"_ArrayLikeAdapter's {name}: {_ARRAYS_WANTED}"
                )
        self._x_length = _length(x)
        if _length(y) != self._x_length:
            raise DataCheckFailed(
                f"_ArrayLikeAdapter: x has {self._x_length} records, y {_length(y)}: give as "
                "many targets as inputs"
            )
        if batch_size > self._x_length:
            raise DataCheckFailed(
                f"_ArrayLikeAdapter: batch size {batch_size} is larger than the data "
                f"({self._x_length} records): use a smaller batch size or more data"
            )
        if sample_weights is not None and len(sample_weights) != self._x_length:
            raise DataCheckFailed(
                f"_ArrayLikeAdapter: sample_weights has {len(sample_weights)} records, x "
                f"{self._x_length}: give one weight per record"
            )
        self.x, self.y, self.sample_weight = x, y, sample_weights
        self.batch_size = batch_size
        self.drop_leftovers = drop_leftovers

    def __len__(self) -> int:
        batches = self._x_length / self.batch_size
        return math.floor(batches) if self.drop_leftovers else math.ceil(batches)

    def __getitem__(self, index: int) -> tuple:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        start = index * self.batch_size
        end = min(start + self.batch_size, self._x_length)
        batch = (_rows(self.x, start, end), _rows(self.y, start, end))
        if self.sample_weight is None:
            return batch
        return (*batch, self.sample_weight[start:end])


class SequenceAdapter:
    """A Sequence with the loader settings Determined once took with it (deprecated there since
    0.13 in favour of `context.configure_fit()`). Determined trains on `sequence`; the settings
    are kept as attributes and otherwise ignored.

    Args:
        sequence: a `keras.utils.Sequence` / `PyDataset`.
        use_multiprocessing: ignored.
        workers: ignored.
        max_queue_size: ignored.
    """

    def __init__(
        self,
        sequence: Any,
        use_multiprocessing: bool = False,
        workers: int = 1,
        max_queue_size: int = 10,
    ) -> None:
        self.sequence = sequence
        self.use_multiprocessing = use_multiprocessing
        self.workers = workers
        self.max_queue_size = max_queue_size

    @property
    def _determined_sequence(self) -> Any:
        """What the managed loop reads (see `_data.unwrap_adapter`)."""
        return self.sequence


def _is_dataset_or_sequence(data: Any) -> bool:
    if isinstance(data, (SequenceAdapter, _SEQUENCE_BASE)):
        return True
    import keras
    import tensorflow as tf

    kinds: list[type] = [tf.data.Dataset, keras.utils.PyDataset]
    tf_keras = _flavor.tf_keras_module()
    if tf_keras is not None:
        kinds.append(tf_keras.utils.Sequence)
    return isinstance(data, tuple(kinds))


def _adapt_data_from_data_loader(input_data: Any, batch_size: int) -> Any:
    """What a `build_*_data_loader()` returned, as one data object: a dataset or Sequence as it
    is, a tuple `(x, y)` / `(x, y, sample_weight)` of arrays as an `_ArrayLikeAdapter`.

    Args:
        input_data: the loader's return value.
        batch_size: records per batch for arrays.

    Returns:
        The dataset, Sequence or adapter.
    """
    if _is_dataset_or_sequence(input_data):
        return input_data
    if not isinstance(input_data, tuple) or len(input_data) not in (2, 3):
        raise errors.InvalidDataTypeException(
            type(input_data),
            "a data loader returns a tf.data.Dataset, a keras.utils.Sequence/PyDataset, a "
            "SequenceAdapter, or a tuple (x, y) or (x, y, sample_weight) of numpy arrays",
        )
    sample_weight = input_data[2] if len(input_data) == 3 else None
    return _ArrayLikeAdapter(input_data[0], input_data[1], batch_size, sample_weight)


def _adapt_data_from_fit_args(x: Any, y: Any, sample_weight: Any, batch_size: int) -> Any:
    """`fit()`'s `x`, `y` and `sample_weight` as one data object (the Native API's step from
    `fit()` arguments to what a Trial's data loader returns).

    Args:
        x: a dataset, Sequence or arrays.
        y: the targets (None with a dataset or Sequence, which holds them).
        sample_weight: per-record weights, or None.
        batch_size: records per batch for arrays.

    Returns:
        `x` itself, or an `_ArrayLikeAdapter` of the arrays.
    """
    if _is_dataset_or_sequence(x):
        if y is not None:
            raise errors.InvalidDataTypeException(
                type(y),
                "y should not be specified when x is a keras.utils.Sequence or a "
                "tf.data.Dataset (the targets come from x): drop y",
            )
        return x
    return _ArrayLikeAdapter(x, y, batch_size, sample_weight)


InputData = Any | SequenceAdapter | tuple
"""What `TFKerasTrial.build_*_data_loader()` may return: a `tf.data.Dataset` (batched), a
`keras.utils.Sequence`/`PyDataset`, a `SequenceAdapter`, or a tuple `(x, y)` /
`(x, y, sample_weight)` of `ArrayLike` (batched with `context.get_per_slot_batch_size()`)."""
