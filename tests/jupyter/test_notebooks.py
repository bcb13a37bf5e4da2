"""Every notebook in notebooks/ executed by papermill against a real JupyterLab server process.

The kernel gets what a kernel started by that server gets (DET_MASTER, DET_MASTER_TOKEN) plus
JPY_SESSION_NAME (as in a real Lab session), and each test asserts the experiment's outcome
through the hosted API.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_determined._widgets import MIME_TYPE

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

NOTEBOOKS = REPO / "notebooks"
ALL_NOTEBOOKS = sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))


def run_notebook(server, name: str, work: Path, timeout: float = 420) -> tuple[dict, str]:
    """papermill NAME in a copy of notebooks/; returns (executed notebook, papermill output)."""
    work.mkdir(parents=True, exist_ok=True)
    for path in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(path, work / path.name)
    source, output = work / name, work.parent / f"{Path(name).stem}.out.ipynb"
    env = server.kernel_environment()
    env["JPY_SESSION_NAME"] = str(source)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(source),
            str(output),
            "-k",
            "python3",
            "--cwd",
            str(work),
            "--no-progress-bar",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    executed = json.loads(output.read_text()) if output.exists() else {"cells": []}
    return executed, completed.stdout + completed.stderr


def cell_error(executed: dict) -> dict | None:
    for cell in executed["cells"]:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return out
    return None


def experiment_named(server, name: str) -> dict:
    matches = [e for e in server.api("GET", "experiments")["experiments"] if e["name"] == name]
    assert matches, f"no experiment named {name!r}"
    return matches[-1]


def test_every_notebook_is_covered() -> None:
    assert ALL_NOTEBOOKS == [
        "core_v2_in_kernel.ipynb",
        "keras_native.ipynb",
        "pytorch_trial.ipynb",
        "quickstart.ipynb",
        "search_widget.ipynb",
    ]


def test_quickstart(lab_server, tmp_path) -> None:
    executed, log = run_notebook(lab_server, "quickstart.ipynb", tmp_path / "work")
    assert cell_error(executed) is None, log
    experiment = experiment_named(lab_server, "quickstart")
    answer = lab_server.wait_experiment(experiment["id"])
    trial = answer["trials"][0]
    assert answer["experiment"]["state"] == "COMPLETED", lab_server.trial_logs(trial["id"])
    assert trial["steps_completed"] == 4
    assert answer["experiment"]["best_validation"] < 0.5  # digits: far better than chance
    # What was exported: the saved notebook's cells above the submitting cell, minus det-skip.
    notebook = answer["experiment"]["notebook"]
    assert notebook["path"] == str(tmp_path / "work" / "quickstart.ipynb")
    assert notebook["cell_ids"] == ["c01", "c02", "c03", "c05"]
    assert "load_digits" in notebook["script"] and "classes:" not in notebook["script"]
    # The last cell (%det describe last) printed the finished experiment.
    text = "".join("".join(out.get("text", "")) for out in executed["cells"][-1]["outputs"])
    assert f"Experiment {experiment['id']} quickstart: COMPLETED" in text


def test_core_v2_in_kernel(lab_server, tmp_path) -> None:
    executed, log = run_notebook(lab_server, "core_v2_in_kernel.ipynb", tmp_path / "work")
    assert cell_error(executed) is None, log
    experiment = experiment_named(lab_server, "core-v2-in-kernel")
    assert experiment["unmanaged"] is True and experiment["state"] == "COMPLETED"
    [trial] = lab_server.api("GET", f"experiments/{experiment['id']}")["trials"]
    # Two runs of one trial: the second resumed from step 20 and went on to 40.
    assert trial["state"] == "COMPLETED" and trial["run_id"] == 2
    assert trial["steps_completed"] == 40
    metrics = lab_server.api("GET", f"trials/{trial['id']}/metrics", params={"group": "training"})
    assert [m["steps_completed"] for m in metrics["metrics"]] == list(range(1, 41))
    assert experiment["best_validation"] < 0.01  # y = 3x + 1 learned
    logs = lab_server.trial_logs(trial["id"])
    assert "trained to step 20" in logs and "resumed trial" in logs and "at step 20" in logs


def test_search_widget(lab_server, tmp_path) -> None:
    executed, log = run_notebook(lab_server, "search_widget.ipynb", tmp_path / "work")
    assert cell_error(executed) is None, log
    experiment = experiment_named(lab_server, "digits-search")
    answer = lab_server.wait_experiment(experiment["id"])
    assert answer["experiment"]["state"] == "COMPLETED"
    assert len(answer["trials"]) == 4
    assert all(trial["state"] == "COMPLETED" for trial in answer["trials"])
    # The saved notebook keeps a readable snapshot of the finished search under the cell.
    submit_cell = next(c for c in executed["cells"] if "%%det_submit" in "".join(c["source"]))
    snapshots = [
        "".join(out["data"]["text/html"])
        for out in submit_cell["outputs"]
        if "text/html" in out.get("data", {})
    ]
    assert snapshots and "COMPLETED" in snapshots[-1] and "det-chart" in snapshots[-1]
    # ... beside the live view's data: the experiment id and the same final snapshot.
    [live] = [
        out["data"][MIME_TYPE] for out in submit_cell["outputs"] if MIME_TYPE in out.get("data", {})
    ]
    assert live["experiment_id"] == experiment["id"]
    assert live["snapshot"]["experiment"]["state"] == "COMPLETED"
    assert len(live["snapshot"]["trials"]) == 4


def _native_notebook(lab_server, tmp_path, name: str, experiment_name: str) -> dict:
    executed, log = run_notebook(lab_server, name, tmp_path / "work")
    error = cell_error(executed)
    # The submitting cell (keras.init() or create()) stops the notebook with one line and no
    # traceback: the cells after it run in the trials.
    assert error is not None and error["ename"] == "NotebookSubmitted", log
    assert len(error["traceback"]) == 1 and "Submitted experiment" in error["traceback"][0]
    experiment = experiment_named(lab_server, experiment_name)
    answer = lab_server.wait_experiment(experiment["id"], timeout=400)
    trial = answer["trials"][0]
    assert answer["experiment"]["state"] == "COMPLETED", lab_server.trial_logs(trial["id"])
    return answer


def test_keras_native(lab_server, tmp_path) -> None:
    answer = _native_notebook(lab_server, tmp_path, "keras_native.ipynb", "keras-native-digits")
    assert answer["trials"][0]["steps_completed"] == 8
    assert answer["experiment"]["best_validation"] is not None


def test_pytorch_trial(lab_server, tmp_path) -> None:
    answer = _native_notebook(lab_server, tmp_path, "pytorch_trial.ipynb", "pytorch-trial-digits")
    assert answer["trials"][0]["steps_completed"] == 20
    assert answer["experiment"]["best_validation"] is not None


def _notebook_config(name: str) -> dict:
    """The `config = {...}` of a notebook's submitting cell, evaluated."""
    notebook = json.loads((NOTEBOOKS / name).read_text())
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if "\nconfig = {" in "\n" + source:
            lines = source[source.index("config = {") :].splitlines()
            end = next(i for i, line in enumerate(lines) if line == "}")
            namespace: dict = {}
            exec("\n".join(lines[: end + 1]), namespace)
            return namespace["config"]
    raise AssertionError(f"{name} has no config cell")


@pytest.mark.parametrize(
    "name,framework", [("keras_native.ipynb", "tensorflow"), ("pytorch_trial.ipynb", "torch")]
)
def test_exported_native_notebooks_train_in_trials(
    lab_server, tmp_path, monkeypatch, name, framework
) -> None:
    """The trial half of the Native API from a notebook, independent of the kernel half:
    the whole exported notebook, re-executed by determined.exec.native, trains."""
    importlib.import_module(framework)  # `make test` installs both: a missing one fails here
    from determined.experimental._native import submit_native
    from jupyter_determined import export_notebook_script

    context = tmp_path / "ctx"
    context.mkdir()
    shutil.copy(NOTEBOOKS / name, context / name)
    exported = export_notebook_script(context / name)
    assert exported.warnings == []  # only our own %load_ext, dropped silently
    monkeypatch.setenv("DET_MASTER", lab_server.det_master)
    monkeypatch.setenv("DET_MASTER_TOKEN", lab_server.token)
    defaults = None
    if framework == "tensorflow":
        from determined.experimental.keras import KERAS_DEFAULTS as defaults
    experiment_id = submit_native(
        _notebook_config(name),
        str(context),
        ["_det_notebook.py"],
        extra_files={"_det_notebook.py": exported.script.encode()},
        defaults=defaults,
    )
    answer = lab_server.wait_experiment(experiment_id, timeout=400)
    trial = answer["trials"][0]
    assert answer["experiment"]["state"] == "COMPLETED", lab_server.trial_logs(trial["id"])
    expected = _notebook_config(name)["searcher"]["max_length"]["batches"]
    assert trial["steps_completed"] == expected
    assert trial["latest_validation"] is not None
