"""The Estimator tests need TensorFlow 2.15 + tensorflow-estimator: `make test` runs them in .venv-tf215.

Which files are collected depends on the environment, never skipped one by one:
* with tensorflow-estimator (the .venv-tf215 run): everything but test_estimator_unavailable.py;
* without it (the main .venv, TensorFlow >= 2.16): only test_estimator_unavailable.py, the clear error.
"""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
import tempfile

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ESTIMATOR_INSTALLED = importlib.util.find_spec("tensorflow_estimator") is not None

if ESTIMATOR_INSTALLED:
    collect_ignore = ["test_estimator_unavailable.py"]
else:
    collect_ignore = [
        "test_estimator_local.py",
        "test_estimator_e2e.py",
        "test_estimator_compat.py",
    ]
collect_ignore += ["digits_native.py", "digits_trial.py", "iris_v1_trial.py"]


@pytest.fixture
def scripts(tmp_path: pathlib.Path) -> pathlib.Path:
    """A context directory holding copies of digits_native.py and digits_trial.py."""
    work = tmp_path / "context"
    work.mkdir()
    for name in ("digits_native.py", "digits_trial.py"):
        shutil.copy(HERE / name, work / name)
    return work


@pytest.fixture(autouse=True)
def _private_temp_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local runs leave the estimator's model_dir (det-estimator-*) for the script to use: keep them in tmp_path."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
