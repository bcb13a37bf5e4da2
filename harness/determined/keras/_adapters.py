"""The data types and adapters Determined's `determined.keras` exported (0.13-0.38).

* `ArrayLike`, `InputData`: type aliases (what `build_training_data_loader` may return);
* `_ArrayLikeAdapter`: arrays as a Sequence of batches (the 0.13 Native examples import it);
* `SequenceAdapter`: a Sequence plus loader settings (deprecated in Determined since 0.13,
  replaced by `context.configure_fit()`); the managed loop unwraps it and reads the Sequence
  itself, so its `workers`/`use_multiprocessing`/`max_queue_size` have no effect.

The Sequence base is what `tf.keras` is in this process: `keras.utils.PyDataset` (Keras 3), or
`tf_keras.utils.Sequence` under `TF_USE_LEGACY_KERAS=1`, so an adapter can also be handed to a
plain `fit()` of that Keras.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from determined import errors
from determined.keras import _flavor

_KERAS = _flavor.default_module()
_SEQUENCE_BASE: type = (
    _KERAS.utils.PyDataset if hasattr(_KERAS.utils, "PyDataset") else _KERAS.utils.Sequence
)

ArrayLike = np.ndarray | list | dict
"""A numpy array, or a list or dict of them (a model with several inputs or outputs)."""


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
        raise errors.InvalidExperimentException(
            f"the arrays of one input have different lengths {sorted(lengths)}"
        )
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
                raise errors.InvalidExperimentException(
                    f"_ArrayLikeAdapter: {name} must be a numpy array or a list/dict of numpy "
                    f"arrays (a tf.data.Dataset or Sequence needs no adapter), got {type(data).__name__}"
                )
        self._x_length = _length(x)
        if _length(y) != self._x_length:
            raise errors.InvalidExperimentException(
                f"_ArrayLikeAdapter: x has {self._x_length} records, y {_length(y)}"
            )
        if batch_size > self._x_length:
            raise errors.InvalidExperimentException(
                f"_ArrayLikeAdapter: batch size {batch_size} is larger than the data ({self._x_length})"
            )
        if sample_weights is not None and len(sample_weights) != self._x_length:
            raise errors.InvalidExperimentException(
                "_ArrayLikeAdapter: sample_weights and x have different lengths"
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


InputData = Any | SequenceAdapter | tuple
"""What `TFKerasTrial.build_*_data_loader()` may return: a `tf.data.Dataset` (batched), a
`keras.utils.Sequence`/`PyDataset`, a `SequenceAdapter`, or a tuple `(x, y)` /
`(x, y, sample_weight)` of `ArrayLike` (batched with `context.get_per_slot_batch_size()`)."""
