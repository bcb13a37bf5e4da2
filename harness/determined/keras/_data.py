"""Training data as a deterministic function of the global batch index.

The managed loop trains in chunks (one `fit` call per chunk). For pause/resume to give the
same losses as an uninterrupted run, batch k must be the same batch whichever chunk asks for
it, so every source can produce the batches `[start, end)` directly:

* arrays (`x`, `y`, `sample_weight`, possibly dicts/lists of arrays): an endless stream of
  epochs, each a permutation seeded by (trial seed, epoch) when shuffling; batch k is stream
  positions `k*bs .. (k+1)*bs` (epochs join without partial batches). With the TensorFlow
  backend the arrays are converted to tensors once, and each `fit` call gets its batches
  gathered from them by one `tf.gather` and sliced batch by batch (`from_tensor_slices`): no
  per-batch function in the input pipeline, which costs plain Keras (its array adapter maps a
  gather over every batch) ~10% of a small model's step. Elsewhere, or for arrays TensorFlow
  cannot hold (objects, `None` leaves), the rows are gathered in numpy and handed to Keras'
  own array adapter;
* `keras.utils.PyDataset` / `Sequence`: batch k is `dataset[k % len(dataset)]`;
* `tf.data.Dataset` (already batched): read in order from one repeating iterator, so later
  `fit` calls continue its iteration (a new iterator would reshuffle a dataset that shuffles
  each iteration); asking for an earlier or later start (a resume) re-creates the iterator and
  has tf.data skip ahead. `fit` gets a dataset that pulls each batch from that iterator inside
  TensorFlow, without Python in the loop.
"""

from __future__ import annotations

import logging
import types
from typing import Any

import keras
import numpy as np

from determined import errors
from determined.common import expconf

logger = logging.getLogger("determined.keras")


def _leaves(structure: Any) -> list:
    return keras.tree.flatten(structure)


def _num_records(x: Any) -> int:
    leaves = [leaf for leaf in _leaves(x) if leaf is not None]
    if not leaves:
        raise errors.InvalidExperimentException("fit(): x holds no arrays")
    lengths = {len(leaf) for leaf in leaves}
    if len(lengths) != 1:
        raise errors.InvalidExperimentException(
            f"fit(): the input arrays have different lengths {sorted(lengths)}"
        )
    return lengths.pop()


def _take(structure: Any, index: np.ndarray) -> Any:
    if structure is None:
        return None
    return keras.tree.map_structure(
        lambda a: None if a is None else np.asarray(a)[index], structure
    )


def _nbytes(structure: Any) -> int:
    """Bytes held by the arrays/tensors of a structure (a batch)."""
    total = 0
    for leaf in _leaves(structure):
        if leaf is None:
            continue
        if isinstance(leaf, np.ndarray):
            total += leaf.nbytes
            continue
        dtype = getattr(leaf, "dtype", None)
        itemsize = getattr(dtype, "size", None) or getattr(dtype, "itemsize", None)
        shape = getattr(leaf, "shape", None)
        if isinstance(itemsize, int) and shape is not None and None not in tuple(shape):
            total += int(np.prod(tuple(shape), dtype=np.int64)) * itemsize
        else:
            total += np.asarray(leaf).nbytes
    return total


def _is_tf_dataset(data: Any) -> bool:
    try:
        import tensorflow as tf
    except ImportError:  # pragma: no cover - keras without tensorflow
        return False
    return isinstance(data, tf.data.Dataset)


def _is_sequence(data: Any) -> bool:
    return isinstance(data, keras.utils.PyDataset) or (
        hasattr(data, "__getitem__")
        and hasattr(data, "__len__")
        and not isinstance(data, (np.ndarray, list, tuple, dict))
    )


class _BatchListMixin:
    """Materialised batches of one chunk, fed to the original `fit` (a `keras.utils.PyDataset`
    or a `tf_keras.utils.Sequence`, whichever the model's Keras takes)."""

    def __init__(self, batches: list) -> None:
        super().__init__()
        self._batches = batches

    def __len__(self) -> int:
        return len(self._batches)

    def __getitem__(self, index: int) -> Any:
        return self._batches[index]


_BATCH_LISTS: dict[str, type] = {}


def batch_list(batches: list, module: types.ModuleType = keras) -> Any:
    """`batches` as the Sequence type of `module` (`keras` or `tf_keras`)."""
    if module.__name__ not in _BATCH_LISTS:
        base = (
            module.utils.PyDataset if hasattr(module.utils, "PyDataset") else module.utils.Sequence
        )
        _BATCH_LISTS[module.__name__] = type("_BatchList", (_BatchListMixin, base), {})
    return _BATCH_LISTS[module.__name__](batches)


class BatchSource:
    """Base: `fit_kwargs(start, end)` returns the data arguments for training batches [start, end)."""

    records: int | None = None  # records per epoch when known (arrays, sized datasets)
    keras_module: types.ModuleType = keras  # the model's Keras (`keras` or `tf_keras`)
    streams = False  # True: `fit_kwargs` holds no batches in memory (no data budget applies)
    _batch_bytes: int = 0  # 0 until known

    def fit_kwargs(self, start: int, end: int) -> dict:
        raise NotImplementedError

    def bytes_per_batch(self) -> int:
        """The memory one batch takes when handed to `fit` (0: not known yet)."""
        return self._batch_bytes

    def _measure(self, batches: list) -> None:
        if not self._batch_bytes and batches:
            self._batch_bytes = _nbytes(batches[0])

    def sample_inputs(self) -> Any:
        """A batch of inputs, to build a model that has not seen data yet (here: from a source
        whose `fit_kwargs` hands `fit` a `_BatchList`; the others override this)."""
        batch = self.fit_kwargs(0, 1)["x"][0]
        return batch[0] if isinstance(batch, tuple) else batch


_NOT_CONVERTED = object()


class ArraySource(BatchSource):
    def __init__(
        self, x: Any, y: Any, sample_weight: Any, batch_size: int, *, shuffle: bool, seed: int
    ) -> None:
        self.x, self.y, self.sample_weight = x, y, sample_weight
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.records = _num_records(x)
        self._permutations: dict[int, np.ndarray] = {}
        one = np.zeros(1, dtype=np.int64)
        self._batch_bytes = batch_size * sum(
            _nbytes(_take(part, one)) for part in (x, y, sample_weight)
        )
        self._tensors: Any = _NOT_CONVERTED

    def _tf_tensors(self) -> tuple | None:
        """(x, y[, sample_weight]) as TensorFlow tensors, converted once, when `fit` can be fed a
        dataset of them; None when it cannot (another backend, data TensorFlow cannot hold).
        Floats are cast to Keras' floatx, as Keras does with arrays handed to `fit`."""
        if self._tensors is not _NOT_CONVERTED:
            return self._tensors
        self._tensors = None
        if keras.backend.backend() != "tensorflow" or (
            self.y is None and self.sample_weight is not None
        ):
            return None
        import tensorflow as tf

        floatx = np.dtype(keras.backend.floatx())

        def convert(leaf: Any) -> Any:
            array = np.asarray(leaf)
            if array.dtype.kind == "f" and array.dtype != floatx:
                array = array.astype(floatx)
            if array.dtype.kind == "O":
                raise TypeError("object arrays are gathered in numpy")
            return tf.convert_to_tensor(array)

        parts = [part for part in (self.x, self.y, self.sample_weight) if part is not None]
        try:
            if any(leaf is None for part in parts for leaf in _leaves(part)):
                return None
            with tf.device("CPU:0"):  # input data stays in host memory, as in Keras' own adapter
                self._tensors = tuple(
                    keras.tree.lists_to_tuples(keras.tree.map_structure(convert, part))
                    for part in parts
                )
        except (TypeError, ValueError, tf.errors.OpError) as err:
            logger.info("training arrays are gathered in numpy for each fit() call (%s)", err)
        return self._tensors

    def _tf_batches(self, tensors: tuple, start: int, end: int) -> Any:
        """Batches [start, end) as a dataset: gathered by one `tf.gather` per array, then sliced
        one batch per element (no per-batch function, no background thread)."""
        import tensorflow as tf

        def gather(tensor: Any) -> Any:
            rows = tf.gather(tensor, index, axis=0)
            return tf.reshape(rows, [end - start, self.batch_size, *rows.shape[1:]])

        with tf.device("CPU:0"):  # not on a GPU: tf.data reads its inputs from host memory
            index = tf.constant(self.indices(start, end))
            batches = tf.nest.map_structure(gather, tensors)
        return tf.data.Dataset.from_tensor_slices(batches)

    def sample_inputs(self) -> Any:
        return _take(self.x, self.indices(0, 1))

    def _known_records(self) -> int:
        if self.records is None:  # only index-addressed sources (arrays) get here
            raise RuntimeError("this training source has no known number of records")
        return self.records

    def _permutation(self, epoch: int) -> np.ndarray:
        records = self._known_records()
        if not self.shuffle:
            return np.arange(records)
        if epoch not in self._permutations:
            if len(self._permutations) > 4:
                self._permutations.clear()
            rng = np.random.default_rng([self.seed, epoch])
            self._permutations[epoch] = rng.permutation(records)
        return self._permutations[epoch]

    def indices(self, start: int, end: int) -> np.ndarray:
        """Record indices of stream positions [start * batch_size, end * batch_size): one slice of
        each epoch's permutation that the range touches."""
        position, last = start * self.batch_size, end * self.batch_size
        records = self._known_records()
        parts = []
        while position < last:
            epoch, offset = divmod(position, records)
            take = min(records - offset, last - position)
            parts.append(self._permutation(epoch)[offset : offset + take])
            position += take
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    def fit_kwargs(self, start: int, end: int) -> dict:
        tensors = self._tf_tensors()
        if tensors is not None:
            return {"x": self._tf_batches(tensors, start, end), "shuffle": False}
        index = self.indices(start, end)
        return {
            "x": _take(self.x, index),
            "y": _take(self.y, index),
            "sample_weight": _take(self.sample_weight, index),
            "batch_size": self.batch_size,
            "shuffle": False,
        }


class SequenceSource(BatchSource):
    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self.length = len(dataset)
        if self.length == 0:
            raise errors.InvalidExperimentException("fit(): the training dataset is empty")

    def fit_kwargs(self, start: int, end: int) -> dict:
        batches = []
        for k in range(start, end):
            if k > start and k % self.length == 0 and hasattr(self.dataset, "on_epoch_end"):
                self.dataset.on_epoch_end()
            batches.append(self.dataset[k % self.length])
        self._measure(batches)
        return {
            "x": batch_list(batches, self.keras_module),
            "shuffle": False,
        }  # the order is batch k = f(k)


class TFDatasetSource(BatchSource):
    streams = True

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self._iterator: Any = None
        self._position = 0
        try:
            cardinality = int(dataset.cardinality())
        except Exception:  # noqa: BLE001 - unknown cardinality is fine
            cardinality = -1
        if cardinality == 0:
            raise errors.InvalidExperimentException("fit(): the training tf.data.Dataset is empty")

    def _seek(self, start: int) -> None:
        if self._iterator is None or self._position != start:
            self._iterator = iter(self.dataset.repeat().skip(start))
            self._position = start

    def fit_kwargs(self, start: int, end: int) -> dict:
        # Reading the batches in Python and feeding them back (a PyDataset) made managed training
        # ~2x slower than plain fit on the same dataset; this pulls each from the iterator in a
        # tf.data map, in TensorFlow. Keras pulls exactly the steps it trains (no prefetch here).
        import tensorflow as tf

        self._seek(start)
        iterator = self._iterator
        self._position = end
        batches = tf.data.Dataset.range(end - start).map(lambda _: iterator.get_next())
        return {"x": batches, "shuffle": False}

    def sample_inputs(self) -> Any:
        # Zeros shaped like the dataset's elements: iterating the dataset here would advance a
        # reshuffling dataset's seed, and the training iterator would not be the one an
        # uninterrupted run reads.
        import tensorflow as tf

        spec = self.dataset.element_spec
        inputs = spec[0] if isinstance(spec, tuple) else spec
        try:
            return tf.nest.map_structure(
                lambda leaf: tf.zeros([1 if d is None else d for d in leaf.shape], leaf.dtype),
                inputs,
            )
        except (TypeError, ValueError):  # e.g. string or ragged inputs: read one batch
            batch = next(iter(self.dataset.take(1)))
            return batch[0] if isinstance(batch, tuple) else batch


def training_source(
    x: Any,
    y: Any,
    sample_weight: Any,
    *,
    batch_size: int,
    shuffle: bool,
    seed: int,
    keras_module: types.ModuleType = keras,
) -> BatchSource:
    """The batch source of fit's (or a data loader's) training data.

    Args:
        x, y, sample_weight: as passed to `fit` (x may be a dataset, a Sequence/PyDataset or a
            `det.keras.SequenceAdapter`).
        batch_size: records per batch (per slot).
        shuffle: shuffle arrays each epoch.
        seed: the trial seed (the shuffles' seed).
        keras_module: the model's Keras, `keras` or `tf_keras`.

    Returns:
        The source.
    """
    if x is None:
        raise errors.InvalidExperimentException("fit(): no training data (x) was given")
    x = unwrap_adapter(x)
    source: BatchSource
    if _is_tf_dataset(x):
        source = TFDatasetSource(x)
    elif _is_sequence(x):
        source = SequenceSource(x)
    else:
        source = ArraySource(x, y, sample_weight, batch_size, shuffle=shuffle, seed=seed)
    source.keras_module = keras_module
    return source


def unwrap_adapter(data: Any) -> Any:
    """The Sequence inside a `det.keras.SequenceAdapter` (its loader settings do not apply)."""
    sequence = getattr(data, "_determined_sequence", None)
    return data if sequence is None else sequence


def validation_kwargs(validation_data: Any, *, batch_size: int) -> dict:
    """The `evaluate()` arguments for fit's `validation_data` (a tuple, dataset or PyDataset)."""
    if validation_data is None:
        raise errors.InvalidExperimentException(
            "fit(): validation_data is required under Determined (validation metrics drive the "
            "searcher and checkpoint selection): pass validation_data=(x_val, y_val) or a dataset"
        )
    validation_data = unwrap_adapter(validation_data)
    if _is_tf_dataset(validation_data) or _is_sequence(validation_data):
        return {"x": validation_data}
    if isinstance(validation_data, (tuple, list)) and len(validation_data) in (2, 3):
        x, y, *rest = validation_data
        return {
            "x": x,
            "y": y,
            "sample_weight": rest[0] if rest else None,
            "batch_size": batch_size,
        }
    raise errors.InvalidExperimentException(
        f"fit(): validation_data must be (x, y), (x, y, sample_weight), a tf.data.Dataset or a "
        f"keras.utils.PyDataset, got {type(validation_data).__name__}"
    )


def batches_per_epoch(records: int, batch_size: int) -> int:
    """Batches in an epoch of `records` (the harness's one conversion)."""
    return expconf.batches_per_epoch(records, batch_size)
