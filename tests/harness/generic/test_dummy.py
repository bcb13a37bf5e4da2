"""The Generic API off the master: a thin alias over the Core API's dummy contexts."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import determined as det

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def off_the_master(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("DET_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def test_generic_loop_off_the_master(tmp_path):
    with det.generic.init(
        hparams={"lr": 0.1}, trial_seed=7, checkpoint_storage=str(tmp_path / "c")
    ) as context:
        assert context.training.hparams == {"lr": 0.1}
        assert context.training.trial_seed == 7
        assert context.latest_checkpoint is None
        with pytest.raises(RuntimeError, match="report metrics first"):
            with context.checkpoint.save_path():
                pass
        epochs = []
        for op in context.training.basic_search():
            epochs.append(op.epochs)
            context.training.report_training_metrics(batches_trained=12, metrics={"loss": 1.0})
            op.report_progress(1)
            with context.checkpoint.save_path() as path:
                (path / "w").write_text("weights")
            assert context.should_preempt() is False
            context.training.report_validation_metrics(batches_trained=12, metrics={"loss": 0.5})
            op.complete(0.5)
        assert epochs == [1]
        stored = tmp_path / "c" / context.checkpoint.last_uuid
        assert json.loads((stored / "metadata.json").read_text()) == {"steps_completed": 12}
        assert (stored / "w").read_text() == "weights"


def test_generic_init_without_with_closes_at_exit(tmp_path):
    script = (
        "import determined as det\n"
        "context = det.generic.init()\n"
        "context.training.report_training_metrics(batches_trained=1, metrics={'a': 1})\n"
        "print('done')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = str(ROOT / "harness")
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"


@pytest.mark.slow
def test_generic_walkthrough_runs_off_the_master(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = str(ROOT / "harness")
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    result = subprocess.run(
        [sys.executable, "train.py"],
        cwd=ROOT / "examples" / "generic_api",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "report_validation_metrics(steps_completed=23" in result.stderr
    saved = list((tmp_path / "xdg" / "determined").iterdir())
    assert len(saved) == 1 and (saved[0] / "state.pt").exists()
