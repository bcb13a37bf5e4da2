"""The managed Keras loop trains several chunks per `fit` call without changing what is trained.

Sharing one `fit` call between chunks (`steps_per_epoch` = chunk length) is only a speed-up: the
metrics reported at every chunk end, the validations, the checkpoints and the final weights must
be those of one `fit` call per chunk (forced here), for arrays, `keras.utils.PyDataset` and
`tf.data.Dataset`, with and without `steps_per_execution`.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import sklearn.datasets as sklearn_datasets  # noqa: E402

from determined import core  # noqa: E402
from determined.keras import _data, _loop  # noqa: E402
from determined.keras._loop import LoopMode, ManagedLoop, TrainingSpec  # noqa: E402

pytestmark = pytest.mark.slow

_KERAS_FIT = _loop.original_fit


@pytest.fixture(scope="module")
def digits():
    x, y = sklearn_datasets.load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    return (x[:600], y[:600]), (x[1500:], y[1500:])


class _Batches(keras.utils.PyDataset):
    def __init__(self, x, y, batch_size):
        super().__init__()
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return len(self.x) // self.batch_size

    def __getitem__(self, index):
        part = slice(index * self.batch_size, (index + 1) * self.batch_size)
        return self.x[part], self.y[part]


def _training_data(kind, x, y):
    if kind == "arrays":
        return _data.training_source(x, y, None, batch_size=16, shuffle=True, seed=3)
    if kind == "pydataset":
        return _data.training_source(
            _Batches(x, y, 16), None, None, batch_size=16, shuffle=True, seed=3
        )
    import tensorflow as tf

    return _data.training_source(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(16),
        None,
        None,
        batch_size=16,
        shuffle=True,
        seed=3,
    )


def _run(kind, digits, tmp_path, *, steps_per_execution, budget, monkeypatch, callbacks=()):
    (x, y), (xv, yv) = digits
    monkeypatch.setattr(_loop, "FIT_DATA_BUDGET_BYTES", budget)
    if budget == 0:  # one fit call per chunk, also for a streamed tf.data dataset (no budget)
        chunks_per_fit = ManagedLoop._chunks_per_fit
        monkeypatch.setattr(
            ManagedLoop,
            "_chunks_per_fit",
            lambda self, target: (chunks_per_fit(self, target)[0], 1),
        )
    fit_calls = []

    def counting_fit(model, **kwargs):
        fit_calls.append(kwargs.get("steps_per_epoch"))
        return _KERAS_FIT(model, **kwargs)

    monkeypatch.setattr(_loop, "original_fit", counting_fit)
    keras.utils.set_random_seed(11)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.003),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        steps_per_execution=steps_per_execution,
    )
    spec = TrainingSpec(
        model=model,
        train=_training_data(kind, x, y),
        validation={"x": xv, "y": yv, "batch_size": 16},
        callbacks=list(callbacks),
    )
    # Chunks (ends): 10 20 25v 30 40c 50v 60 70 75v 80c 90v -- lengths 10 10 5 5 10 10 10 10 5 5 10.
    config = {
        "scheduling_unit": 10,
        "min_validation_period": {"batches": 25},
        "min_checkpoint_period": {"batches": 40},
        "searcher": {"metric": "val_loss", "max_length": {"batches": 90}},
    }
    with core._dummy_init(checkpoint_storage=str(tmp_path / f"ckpt-{budget}")) as core_context:
        result = ManagedLoop(
            core_context, spec, config=config, global_batch_size=16, mode=LoopMode.LOCAL
        ).run()
    return result, [w.copy() for w in model.get_weights()], fit_calls


@pytest.mark.parametrize("kind", ["arrays", "pydataset", "tfdata"])
@pytest.mark.parametrize("steps_per_execution", [1, 5])
def test_chunks_sharing_a_fit_call_train_exactly_like_one_call_per_chunk(
    kind, steps_per_execution, digits, tmp_path, monkeypatch
):
    shared, shared_weights, shared_calls = _run(
        kind,
        digits,
        tmp_path,
        steps_per_execution=steps_per_execution,
        budget=64 * 1024 * 1024,
        monkeypatch=monkeypatch,
    )
    single, single_weights, single_calls = _run(
        kind,
        digits,
        tmp_path,
        steps_per_execution=steps_per_execution,
        budget=0,
        monkeypatch=monkeypatch,
    )
    assert single_calls == [None] * 11
    # Runs of equal chunks share a call; a PyDataset's batch size in bytes (the data budget) is
    # known only once its first chunk was read, so its first call trains one chunk; a tf.data
    # dataset is streamed (nothing held), arrays fit the budget.
    assert shared_calls == (
        [None, None, 5, 10, 5, None] if kind == "pydataset" else [10, 5, 10, 5, None]
    )

    def table(result):
        return [(r.group, r.steps_completed, sorted(r.metrics)) for r in result.reports]

    assert table(shared) == table(single)
    assert [r.steps_completed for r in shared.reports if r.group == "validation"] == [
        25,
        50,
        75,
        90,
    ]
    assert len(shared.checkpoints) == len(single.checkpoints) == 3  # at 40, 80 and the end
    for mine, theirs in zip(shared.reports, single.reports, strict=False):
        assert mine.metrics == pytest.approx(theirs.metrics, rel=1e-5, abs=1e-6)
    for mine, theirs in zip(shared_weights, single_weights, strict=False):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
    assert shared.steps_completed == 90


def test_a_chunk_length_that_is_not_a_multiple_of_steps_per_execution_gets_its_own_fit_call(
    digits, tmp_path, monkeypatch
):
    result, _, calls = _run(
        "arrays",
        digits,
        tmp_path,
        steps_per_execution=2,
        budget=64 * 1024 * 1024,
        monkeypatch=monkeypatch,
    )
    assert calls == [10, None, None, 10, None, None, None]  # the chunks of 5 cannot share
    assert [r.steps_completed for r in result.reports if r.group == "training"] == [
        10,
        20,
        25,
        30,
        40,
        50,
        60,
        70,
        75,
        80,
        90,
    ]


class _StopAfter(keras.callbacks.Callback):
    def __init__(self, batches):
        super().__init__()
        self.batches = batches

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.batches:
            self.model.stop_training = True


def test_a_callback_stopping_inside_a_shared_fit_call_ends_training_at_that_batch(
    digits, tmp_path, monkeypatch
):
    result, _, calls = _run(
        "arrays",
        digits,
        tmp_path,
        steps_per_execution=1,
        budget=64 * 1024 * 1024,
        monkeypatch=monkeypatch,
        callbacks=[_StopAfter(23)],
    )
    assert calls == [10, 5]
    assert result.stopped_early and result.steps_completed == 23
    assert [r.steps_completed for r in result.reports] == [
        10,
        20,
        23,
        23,
    ]  # training x3, then validation


def _train_arrays(x, y, sample_weight, tmp_path, name, *, model):
    spec = TrainingSpec(
        model=model,
        train=_data.training_source(x, y, sample_weight, batch_size=16, shuffle=True, seed=5),
        validation={"x": x, "y": y, "batch_size": 16},
        callbacks=[],
    )
    config = {
        "scheduling_unit": 10,
        "searcher": {"metric": "val_loss", "max_length": {"batches": 60}},
    }
    with core._dummy_init(checkpoint_storage=str(tmp_path / name)) as core_context:
        result = ManagedLoop(
            core_context, spec, config=config, global_batch_size=16, mode=LoopMode.LOCAL
        ).run()
    return result, model.get_weights()


def _two_input_model():
    keras.utils.set_random_seed(7)
    pixels, extra = keras.Input((64,), name="pixels"), keras.Input((2,), name="extra")
    hidden = keras.layers.Dense(16, activation="relu")(keras.layers.Concatenate()([pixels, extra]))
    model = keras.Model(
        {"pixels": pixels, "extra": extra}, keras.layers.Dense(10, activation="softmax")(hidden)
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.05),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        steps_per_execution=5,
    )
    return model


@pytest.mark.parametrize("inputs", ["float64 arrays with sample weights", "a dict of arrays"])
def test_arrays_fed_by_index_train_exactly_like_arrays_gathered_in_numpy(
    inputs, digits, tmp_path, monkeypatch
):
    """Under TensorFlow, arrays reach `fit` as a dataset of batches gathered from tensors by index:
    the same batches, dtype casts, sample weights and input structure as gathering the chunk's
    rows in numpy (the path for other backends and for data TensorFlow cannot hold)."""
    (x, y), _ = digits
    if inputs == "a dict of arrays":
        x = {"pixels": x, "extra": np.stack([x[:, 0], x[:, 5]], axis=1)}
        weights, make = None, _two_input_model
    else:
        x, weights = x.astype("float64"), np.linspace(0.5, 1.5, len(y))

        def make():
            keras.utils.set_random_seed(7)
            model = keras.Sequential(
                [
                    keras.Input((64,)),
                    keras.layers.Dense(16, activation="relu"),
                    keras.layers.Dense(10, activation="softmax"),
                ]
            )
            model.compile(
                optimizer=keras.optimizers.SGD(0.05),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"],
                steps_per_execution=5,
            )
            return model

    fed_calls = []
    monkeypatch.setattr(
        _loop,
        "original_fit",
        lambda model, **kw: fed_calls.append(type(kw["x"]).__name__) or _KERAS_FIT(model, **kw),
    )
    fed, fed_weights = _train_arrays(x, y, weights, tmp_path, "fed", model=make())
    assert fed_calls and all("Dataset" in kind for kind in fed_calls)  # fed by a dataset of batches
    monkeypatch.setattr(_data.ArraySource, "_tf_tensors", lambda self: None)
    gathered, gathered_weights = _train_arrays(x, y, weights, tmp_path, "gathered", model=make())
    assert [(r.group, r.steps_completed) for r in fed.reports] == [
        (r.group, r.steps_completed) for r in gathered.reports
    ]
    for mine, theirs in zip(fed.reports, gathered.reports, strict=False):
        assert mine.metrics == pytest.approx(theirs.metrics, rel=1e-5, abs=1e-6)
    for mine, theirs in zip(fed_weights, gathered_weights, strict=False):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
