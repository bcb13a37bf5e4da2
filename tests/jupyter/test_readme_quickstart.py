"""The README's quickstart, step 2, as written: its `config.yaml` and its two cells, taken from
README.md, run in a real kernel (papermill) against the master inside a real JupyterLab server.
If the README changes, this runs the new text."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def quickstart_blocks() -> tuple[str, list[str]]:
    """(config.yaml, [cell sources]) from README.md's "2. Submit from a notebook" step."""
    readme = (REPO / "README.md").read_text()
    start = readme.index("**2. Submit from a notebook.**")
    step = readme[start : readme.index("**3.", start)]
    blocks = re.findall(r"```(\w+)\n(.*?)```", step, flags=re.S)
    kinds = [kind for kind, _ in blocks]
    assert kinds == ["yaml", "python", "python"], kinds
    return blocks[0][1], [blocks[1][1], blocks[2][1]]


def test_the_readme_quickstart_runs(lab_server, tmp_path) -> None:
    config, cells = quickstart_blocks()
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.yaml").write_text(config)
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"q{i}",
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for i, source in enumerate(cells)
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    source = work / "readme.ipynb"
    source.write_text(json.dumps(notebook))
    env = lab_server.kernel_environment()
    env["JPY_SESSION_NAME"] = str(source)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(source),
            str(tmp_path / "out.ipynb"),
            "-k",
            "python3",
            "--cwd",
            str(work),
            "--no-progress-bar",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]

    experiments = [
        e for e in lab_server.api("GET", "experiments")["experiments"] if e["name"] == "quickstart"
    ]
    assert experiments, "the README's cell created no experiment named 'quickstart'"
    answer = lab_server.wait_experiment(experiments[-1]["id"])
    trials = answer["trials"]
    logs = "\n".join(lab_server.trial_logs(trial["id"])[-1500:] for trial in trials)
    assert answer["experiment"]["state"] == "COMPLETED", logs
    assert len(trials) == 3
    for trial in trials:
        assert trial["state"] == "COMPLETED", logs
        assert trial["steps_completed"] == 100
        assert 1e-3 <= trial["hparams"]["lr"] <= 1e-1  # the log-scale hyperparameter
        assert trial["hparams"]["batch_size"] == 32
        expected = (1 - trial["hparams"]["lr"]) ** 100
        assert trial["latest_validation"]["metrics"]["loss"] == pytest.approx(expected)
    assert answer["experiment"]["best_validation"] == pytest.approx(
        min(t["latest_validation"]["metrics"]["loss"] for t in trials)
    )
