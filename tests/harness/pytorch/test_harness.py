"""`python -m determined.exec.harness model_def:Trial` off the master, on the digits example."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from determined.exec import harness

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.fixture
def workdir(digits_context: pathlib.Path) -> pathlib.Path:
    return digits_context


def _harness(workdir: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.exec.harness", *args],
        cwd=workdir,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def in_process(workdir, monkeypatch):
    """Run `harness.main` in this process, from the context directory, off the master."""
    for name in list(os.environ):
        if name.startswith("DET_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(workdir)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "model_def", raising=False)
    yield harness.main
    sys.modules.pop("model_def", None)


def _checkpoint_steps(tmp_path: pathlib.Path) -> list[int]:
    return sorted(
        json.loads((d / "metadata.json").read_text())["steps_completed"]
        for d in (tmp_path / "ckpts").iterdir()
    )


@pytest.mark.slow
def test_harness_trains_the_config_length(workdir, tmp_path):
    result = _harness(workdir, "model_def:DigitsTrial", "--config", "local.yaml")
    assert result.returncode == 0, result.stderr
    # min_validation_period 10 (checkpoint after each validation off the master), end at 20.
    assert "report_validation_metrics(steps_completed=10" in result.stderr
    assert "report_validation_metrics(steps_completed=20" in result.stderr
    assert _checkpoint_steps(tmp_path) == [10, 20]
    ckpt = next(
        d
        for d in (tmp_path / "ckpts").iterdir()
        if json.loads((d / "metadata.json").read_text())["steps_completed"] == 20
    )
    load_data = json.loads((ckpt / "load_data.json").read_text())
    assert load_data["trial_cls_spec"] == "model_def:DigitsTrial"
    assert load_data["hparams"]["hidden_size"] == 64


def test_harness_test_mode(in_process, tmp_path, caplog):
    caplog.set_level("INFO")
    assert in_process(["model_def:DigitsTrial", "--config", "local.yaml", "--test"]) == 0
    assert "report_validation_metrics(steps_completed=1," in caplog.text
    assert _checkpoint_steps(tmp_path) == [1]


def test_harness_resumes_from_a_checkpoint(in_process, tmp_path, caplog):
    assert in_process(["model_def:DigitsTrial", "--config", "local.yaml", "--test"]) == 0
    (uuid,) = [d.name for d in (tmp_path / "ckpts").iterdir()]
    caplog.clear()
    caplog.set_level("INFO")
    assert (
        in_process(["model_def:DigitsTrial", "--config", "local.yaml", "--checkpoint", uuid]) == 0
    )
    assert "resumed from checkpoint" in caplog.text
    assert "report_training_metrics(steps_completed=1," not in caplog.text
    assert _checkpoint_steps(tmp_path) == [1, 10, 20]


def test_harness_reports_a_bad_trial_class(in_process, capsys):
    assert in_process(["model_def:NoSuchTrial", "--config", "local.yaml"]) == 1
    assert "has no attribute 'NoSuchTrial'" in capsys.readouterr().err
    assert in_process(["model_def:digits_datasets", "--config", "local.yaml"]) == 1
    assert "PyTorchTrial" in capsys.readouterr().err


def test_harness_needs_a_config_off_the_master(in_process, capsys):
    assert in_process(["model_def:DigitsTrial"]) == 2
    assert "--config" in capsys.readouterr().err


def test_default_hparams_pick_one_point():
    space = {
        "global_batch_size": 32,
        "lr": {"type": "log", "base": 10, "minval": -2, "maxval": 0},
        "units": {"type": "int", "minval": 4, "maxval": 8},
        "act": {"type": "categorical", "vals": ["relu", "tanh"]},
        "c": {"type": "const", "val": 3},
        "nested": {"depth": {"type": "const", "val": 2}},
    }
    assert harness.default_hparams(space) == {
        "global_batch_size": 32,
        "lr": 0.01,
        "units": 4,
        "act": "relu",
        "c": 3,
        "nested": {"depth": 2},
    }


def test_runner_for_picks_the_trial_api():
    from determined import pytorch

    class Mine(pytorch.PyTorchTrial):
        pass

    assert harness.runner_for(Mine) is harness.run_pytorch_trial
    assert harness.runner_for(object) is None
    assert harness.runner_for(len) is None
