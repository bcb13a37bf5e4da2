"""Names Determined's harness fixtures and e2e fixtures use, written as they use them.

* `context.wrap_reducer(fn, name=...)` with a plain function (Determined's "simple API": the
  returned reducer's `update(value)` collects, `fn` gets every value of the round);
* `from determined.common import check` (`check.CheckFailedError`, `check.true`, ...);
* `from determined.common import util` (`util._LEGACY_TRAINING`, `util.yaml_safe_load`, ...);
* `TFKerasTrialContext.env` (`self.context.env.hparams.get("stop_early")`,
  `self.context.env.container_gpus = []`).
"""

from __future__ import annotations

import io
import pathlib
import random
from typing import Any

import pytest

from determined import pytorch
from tests.harness.pytorch.test_trainer import DigitsTrial, _run


def accuracy_of(values: list[tuple[list[int], list[int]]]) -> float:
    """A reducer function as Determined's docs write one: a flat list of what `update` got."""
    right = sum(sum(int(a == b) for a, b in zip(t, p, strict=True)) for t, p in values)
    return right / sum(len(t) for t, _ in values)


class FunctionReducerTrial(DigitsTrial):
    def __init__(self, context: Any, **kwargs: Any) -> None:
        super().__init__(context, **kwargs)
        self.accuracy = context.wrap_reducer(
            accuracy_of, name="reduced_accuracy", for_training=False
        )
        self.batches: list[tuple[list[int], list[int]]] = []

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict:
        x, y = batch
        predicted = self.model(x).argmax(dim=1)
        pair = (y.tolist(), predicted.tolist())
        self.accuracy.update(pair)
        self.batches.append(pair)
        return {"validation_loss": 1.0}


def test_wrap_reducer_accepts_a_plain_function(tmp_path: pathlib.Path) -> None:
    trial, recorder = _run(
        tmp_path, FunctionReducerTrial, max_length=pytorch.Batch(2), checkpoint_policy="none"
    )
    ((_, metrics),) = recorder.validation
    assert metrics["reduced_accuracy"] == pytest.approx(accuracy_of(trial.batches))
    assert isinstance(trial.accuracy, pytorch.MetricReducer)


def test_wrap_reducer_interleaves_ranks_and_refuses_what_is_not_callable() -> None:
    from determined.pytorch._reducer import _FunctionReducer

    reducer = _FunctionReducer(list)
    # Rank 0 saw batches 0, 2, 4; rank 1 saw 1, 3: the function gets them in batch order.
    assert reducer.cross_slot_reduce([[0, 2, 4], [1, 3]]) == [0, 1, 2, 3, 4]
    with pytorch.init(
        hparams={"global_batch_size": 8},
        exp_conf={"searcher": {"name": "single", "metric": "x", "max_length": 1}},
    ) as context:
        with pytest.raises(TypeError, match="MetricReducer or a function"):
            context.wrap_reducer(42)


def test_determined_common_check() -> None:
    from determined.common import check

    check.true(True)
    check.check_eq(1, 1)
    check.is_instance(1, int)
    check.is_in("a", "abc")
    check.len_eq([1, 2], 2)
    with pytest.raises(check.CheckFailedError, match="batch size: 3 != 4"):
        check.eq(3, 4, "batch size")
    with pytest.raises(check.CheckFailedError, match="expected a true value"):
        check.check_true(False)
    with pytest.raises(ValueError):  # a CheckFailedError is a ValueError
        check.gt(1, 2)
    with pytest.raises(check.CheckFailedError, match="expected an instance of"):
        check.check_isinstance("x", int)
    with pytest.raises(check.CheckFailedError):
        check.is_not_none(None, "model")


def test_determined_common_util() -> None:
    from determined.common import util

    assert (util._LEGACY_TRAINING, util._LEGACY_VALIDATION) == ("training", "validation")
    assert list(util.chunks("ABCDEFG", 3)) == ["ABC", "DEF", "G"]
    assert util.sizeof_fmt(1536) == "1.5KB"
    assert util.strtobool("yes") and not util.strtobool("off") and not util.strtobool("")
    # YAML 1.2, as Determined's loader reads it.
    assert util.yaml_safe_load("lr: 1e-3\nflag: yes\n") == {"lr": 0.001, "flag": "yes"}
    assert util.yaml_safe_load(util.yaml_safe_dump({"a": [1, 2]})) == {"a": [1, 2]}
    assert util.safe_load_yaml_with_exceptions(io.StringIO("a: 1\n")) == {"a": 1}
    with pytest.raises(ValueError, match="invalid experiment config file.*duplicate key"):
        util.safe_load_yaml_with_exceptions("a: 1\na: 2\n")
    calls = iter([(False, None), (True, 7)])
    assert util.wait_for(lambda: next(calls), timeout=5, interval=0) == 7

    state = random.getstate()

    @util.preserve_random_state
    def draws() -> float:
        return random.random()

    draws()
    assert random.getstate() == state

    @util.deprecated("use g")
    def f() -> int:
        return 1

    with pytest.warns(DeprecationWarning, match="f is deprecated.*use g"):
        assert f() == 1


def test_tf_keras_trial_context_env() -> None:
    import determined as det
    from determined import keras

    context = keras.TFKerasTrialContext.from_config(
        {
            "hyperparameters": {"global_batch_size": 8, "stop_early": True},
            "searcher": {"name": "single", "metric": "x", "max_length": 1},
            "entrypoint": "model_def:Trial",
        }
    )
    env = context.env
    assert isinstance(env, det.EnvContext) and env is context.env
    assert env.hparams.get("stop_early") is True  # tf_keras_xor_model.py
    assert env.experiment_config["searcher"]["name"] == "single"
    assert env.on_cluster is False and env.det_trial_id is None
    env.container_gpus = []  # Determined's ancient Keras checkpoints' model_def.py does this
    assert context.env.container_gpus == []
