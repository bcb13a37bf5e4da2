"""Bad Keras data inputs raise what Determined's `test_keras_data.py` expects.

Determined's adapters check their inputs with `determined.common.check` (a failed check raises
`check.CheckFailedError`) and refuse data of the wrong kind with
`det.errors.InvalidDataTypeException`; its tests (and users' code) catch those. Ours raise the
same types, which are also our `InvalidExperimentException` (what the managed loop reports), and
say what is wrong and what to do.
"""

from __future__ import annotations

import numpy as np
import pytest

import determined as det
from determined import keras
from determined.common import check


def test_a_batch_larger_than_the_data_fails_a_check() -> None:
    with pytest.raises(check.CheckFailedError, match=r"batch size 32 is larger than the data \(16"):
        keras._ArrayLikeAdapter(np.arange(0, 16), np.arange(0, 16), batch_size=32)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"x": np.arange(10), "y": np.arange(9), "batch_size": 2}, "x has 10 records, y 9"),
        (
            {"x": np.arange(10), "y": np.arange(10), "batch_size": 2, "sample_weights": np.ones(3)},
            "sample_weights has 3 records, x 10",
        ),
    ],
)
def test_lengths_that_do_not_match_fail_a_check(kwargs: dict, says: str) -> None:
    with pytest.raises(check.CheckFailedError, match=says) as info:
        keras._ArrayLikeAdapter(**kwargs)
    # Still what our loop and older code catch.
    assert isinstance(info.value, det.errors.InvalidExperimentException)


def test_data_of_the_wrong_kind_is_an_invalid_data_type() -> None:
    with pytest.raises(det.errors.InvalidDataTypeException, match=r"Invalid data type \(str\)"):
        keras._ArrayLikeAdapter("not arrays", np.arange(3), batch_size=1)  # type: ignore[arg-type]
    good = keras._adapt_data_from_data_loader((np.arange(4), np.arange(4)), batch_size=1)
    assert isinstance(good, keras._ArrayLikeAdapter) and len(good) == 4
    # Determined's test: a tuple whose x is not arrays.
    with pytest.raises(det.errors.InvalidDataTypeException) as info:
        keras._adapt_data_from_data_loader((None, good), batch_size=1)
    assert "numpy array" in str(info.value)
    with pytest.raises(det.errors.InvalidDataTypeException, match="a tuple"):
        keras._adapt_data_from_data_loader([np.arange(4)], batch_size=1)
    assert issubclass(det.errors.InvalidDataTypeException, det.errors.InvalidExperimentException)


def test_fit_arguments_adapt_as_determined_adapted_them() -> None:
    adapted = keras._adapt_data_from_fit_args(
        x={"k1": np.arange(0, 100), "k2": np.arange(100, 200)},
        y=np.arange(200, 300),
        sample_weight=None,
        batch_size=16,
    )
    assert len(adapted) == 7
    batch_x, batch_y = adapted[3]
    assert np.array_equal(batch_x["k2"], np.arange(148, 164))
    assert np.array_equal(batch_y, np.arange(248, 264))
    # A Sequence carries its own targets: y beside it is refused.
    with pytest.raises(det.errors.InvalidDataTypeException, match="y should not be specified"):
        keras._adapt_data_from_fit_args(x=adapted, y=np.arange(3), sample_weight=None, batch_size=1)
    assert keras._adapt_data_from_fit_args(adapted, None, None, 1) is adapted
