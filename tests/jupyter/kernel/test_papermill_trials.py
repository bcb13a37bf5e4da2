"""Notebooks as trials: `python3 -m determined.exec.notebook train.ipynb` under the hosted master."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from jupyter_determined.kernel._papermill import (
    executed_notebooks,
    is_notebook_entrypoint,
    notebook_entrypoint,
    submit_notebook,
)

REPO = Path(__file__).resolve().parents[3]

TRAINING_CELL = """\
import determined as det

with det.core.init() as core_context:
    x = 0.0
    steps = 0
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            x += lr
            core_context.train.report_training_metrics(steps_completed=steps, metrics={"x": x})
        core_context.train.report_validation_metrics(steps_completed=steps, metrics={"x": x})
        op.report_completed(x)
print(f"trained with lr={lr} label={label}")
"""


def write_notebook(path: Path, *cells: str) -> Path:
    parameters = new_code_cell("lr = 0.1\nlabel = 'default'")
    parameters.metadata["tags"] = ["parameters"]
    notebook = new_notebook(cells=[parameters, *(new_code_cell(source) for source in cells)])
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def test_entrypoint_helpers() -> None:
    assert notebook_entrypoint("train.ipynb") == "python3 -m determined.exec.notebook train.ipynb"
    assert notebook_entrypoint("my nb.ipynb").endswith("'my nb.ipynb'")
    assert is_notebook_entrypoint("train.ipynb")
    assert is_notebook_entrypoint("python3 -m determined.exec.notebook sub/train.ipynb")
    assert not is_notebook_entrypoint("python3 train.py")
    assert not is_notebook_entrypoint(["python3", "train.ipynb"])


def test_runner_reports_a_missing_notebook(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "harness"), str(REPO)])}
    result = subprocess.run(
        [sys.executable, "-m", "determined.exec.notebook", "nope.ipynb"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "nope.ipynb not found in the context directory" in result.stderr


@pytest.fixture(scope="module")
def server(start_jupyter):
    return start_jupyter(app="jupyter_server")


def _session(server):
    from determined.common.api import Session

    return Session(server.det_master, server.token)


@pytest.mark.slow
def test_hparams_are_injected_and_the_executed_notebook_is_kept(server, tmp_path) -> None:
    notebook = write_notebook(tmp_path / "ctx" / "train.ipynb", TRAINING_CELL)
    config = {
        "name": "papermill-grid",
        "max_restarts": 0,
        "hyperparameters": {"lr": {"type": "categorical", "vals": [0.5, 2.0]}, "label": "grid"},
        "searcher": {"name": "grid", "metric": "x", "max_length": 3},
    }
    experiment = submit_notebook(notebook, config, session=_session(server))
    answer = server.wait_experiment(experiment["id"])
    assert (
        answer["experiment"]["config"]["entrypoint"]
        == "python3 -m determined.exec.notebook train.ipynb"
    )
    assert answer["experiment"]["state"] == "COMPLETED", [
        server.trial_logs(t["id"]) for t in answer["trials"]
    ]
    assert len(answer["trials"]) == 2
    for trial in answer["trials"]:
        lr = trial["hparams"]["lr"]
        assert trial["latest_validation"]["metrics"]["x"] == pytest.approx(3 * lr)
        logs = server.trial_logs(trial["id"])
        assert f"trained with lr={lr} label=grid" in logs  # cell output streamed to the logs
        kept = executed_notebooks(server.root_dir, trial["id"])
        assert [path.name for path in kept] == ["train.run-1.ipynb"]
        assert str(kept[0]) in logs  # a log line says where it is
        executed = json.loads(kept[0].read_text())
        injected = [
            c for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", [])
        ]
        assert injected and f"lr = {lr}" in "".join(injected[0]["source"])
        outputs = "".join(
            "".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", [])
        )
        assert f"trained with lr={lr} label=grid" in outputs
        # ... and downloadable through the master: `det t download-notebook`.
        downloaded = tmp_path / f"trial-{trial['id']}.ipynb"
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "determined.cli",
                "t",
                "download-notebook",
                str(trial["id"]),
                "-o",
                str(downloaded),
            ],
            env=server.kernel_environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cli.returncode == 0, cli.stderr
        assert json.loads(downloaded.read_text()) == executed


@pytest.mark.slow
def test_a_failing_cell_errors_the_trial_with_its_traceback(server, tmp_path) -> None:
    notebook = write_notebook(
        tmp_path / "ctx" / "broken.ipynb",
        "print('before the failure')",
        "def load():\n    raise ValueError('bad cell 42')\nload()",
        "print('never runs')",
    )
    config = {
        "name": "papermill-broken",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
    }
    experiment = submit_notebook(notebook, config, session=_session(server))
    answer = server.wait_experiment(experiment["id"])
    trial = answer["trials"][0]
    assert answer["experiment"]["state"] == "ERROR"
    assert trial["state"] == "ERROR"
    logs = server.trial_logs(trial["id"])
    assert "before the failure" in logs
    assert "ValueError: bad cell 42" in logs
    assert "in load" in logs  # the cell's traceback, not just the error line
    assert "never runs" not in logs
    kept = executed_notebooks(server.root_dir, trial["id"])
    assert kept and "bad cell 42" in kept[0].read_text()
