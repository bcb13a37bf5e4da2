"""`det.experimental.create(PyTorchTrial, local=True, ...)` hands the class to the PyTorch harness."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[3]

SCRIPT = """
import sys
import determined as det
from model_def import DigitsTrial

det.experimental.create(DigitsTrial, "local.yaml", local=True, test=sys.argv[1] == "test")
print("create() returned; the script goes on")
"""


@pytest.fixture
def workdir(digits_context: pathlib.Path) -> pathlib.Path:
    (digits_context / "native.py").write_text(SCRIPT)
    return digits_context


def _run(workdir: pathlib.Path, mode: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run(
        [sys.executable, "native.py", mode],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _checkpoint_steps(tmp_path: pathlib.Path) -> list[int]:
    return sorted(
        json.loads((d / "metadata.json").read_text())["steps_completed"]
        for d in (tmp_path / "ckpts").iterdir()
    )


def test_create_local_test_runs_one_batch_of_a_pytorch_trial(workdir, tmp_path):
    result = _run(workdir, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "create() returned; the script goes on" in result.stdout
    assert "report_validation_metrics(steps_completed=1," in result.stderr
    assert _checkpoint_steps(tmp_path) == [1]


def test_create_local_trains_a_pytorch_trial_for_the_configured_length(workdir, tmp_path):
    result = _run(workdir, "real")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "report_validation_metrics(steps_completed=20," in result.stderr
    assert _checkpoint_steps(tmp_path)[-1] == 20
