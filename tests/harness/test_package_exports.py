"""`determined.keras` and `determined.estimator` export Determined's names and nothing else.

The names come from Determined's `__init__.py` files: `determined.keras` at 0.13-0.38 (0.38 adds
`DeterminedCallback`/`TensorBoard`; the Native contexts are 0.13-0.15's, the Native API form we
follow), `determined.estimator` at 0.13-0.24. This project's own loop names, which both packages
used to export, still resolve (older scripts import them) to the private modules' objects, but are
neither in `__all__` nor in the namespace.
"""

from __future__ import annotations

import importlib
import os

import pytest

KERAS_NAMES = {
    "ArrayLike",
    "DeterminedCallback",
    "InputData",
    "SequenceAdapter",
    "TFKerasContext",
    "TFKerasExperimentalContext",
    "TFKerasNativeContext",
    "TFKerasTensorBoard",
    "TFKerasTrainConfig",
    "TFKerasTrial",
    "TFKerasTrialContext",
    "TensorBoard",
    "_ArrayLikeAdapter",
    "_adapt_data_from_data_loader",
    "_adapt_data_from_fit_args",
    "callbacks",
    "get_rng_state",
    "load_model_from_checkpoint_path",
    "set_rng_state",
}
KERAS_OURS = {
    "FitArguments": "determined.keras._context",
    "activate_native_context": "determined.keras._context",
    "LoopMode": "determined.keras._loop",
    "LoopResult": "determined.keras._loop",
    "ManagedLoop": "determined.keras._loop",
    "Report": "determined.keras._loop",
    "format_table": "determined.keras._loop",
    "run_keras_trial": "determined.keras._run",
    "train_native": "determined.keras._run",
    "train_trial_class": "determined.keras._run",
}

ESTIMATOR_NAMES = {
    "EstimatorContext",
    "EstimatorExperimentalContext",
    "EstimatorNativeContext",
    "EstimatorTrial",
    "EstimatorTrialContext",
    "MetricReducer",
    "RunHook",
    "ServingInputReceiverFn",
    "load_estimator_from_checkpoint_path",
}
ESTIMATOR_OURS = {
    "INSTALL_HINT": "determined.estimator._availability",
    "EstimatorUnavailable": "determined.estimator._availability",
    "estimator_available": "determined.estimator._availability",
    "estimator_classes": "determined.estimator._availability",
    "is_estimator": "determined.estimator._availability",
    "require_estimator": "determined.estimator._availability",
    "EstimatorLoop": "determined.estimator._loop",
    "EstimatorSpecs": "determined.estimator._loop",
    "LoopMode": "determined.estimator._loop",
    "LoopResult": "determined.estimator._loop",
    "Report": "determined.estimator._loop",
    "format_table": "determined.estimator._loop",
    "make_metric": "determined.estimator._reducer",
    "run_estimator_trial": "determined.estimator._run",
    "train": "determined.estimator._run",
    "train_trial_class": "determined.estimator._run",
}


def _check(package_name: str, names: set[str], ours: dict[str, str], *, lazy: set[str]) -> None:
    package = importlib.import_module(package_name)
    assert set(package.__all__) == names
    for name in names - lazy:
        assert name in vars(package), name
    for name, home in ours.items():
        assert getattr(package, name) is getattr(importlib.import_module(home), name), name
        # Still out of the namespace after being used.
        assert name not in vars(package) and name not in dir(package), name
    star: dict = {}
    exec(f"from {package_name} import *", star)  # noqa: S102
    assert set(star) - {"__builtins__"} == names
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        package.NoSuchName  # noqa: B018


def test_determined_keras_exports_determineds_names_only() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    pytest.importorskip("keras")
    _check("determined.keras", KERAS_NAMES, KERAS_OURS, lazy=set())


def test_determined_estimator_exports_determineds_names_only() -> None:
    # `from determined.estimator import *` creates RunHook, which needs tf.estimator.
    from determined.estimator._availability import estimator_available

    if not estimator_available()[0]:
        package = importlib.import_module("determined.estimator")
        assert set(package.__all__) == ESTIMATOR_NAMES
        for name, home in ESTIMATOR_OURS.items():
            assert getattr(package, name) is getattr(importlib.import_module(home), name), name
            assert name not in vars(package) and name not in dir(package), name
        return
    _check("determined.estimator", ESTIMATOR_NAMES, ESTIMATOR_OURS, lazy={"RunHook"})
