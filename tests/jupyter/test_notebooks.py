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

from jupyter_determined.kernel._widget import MIME_TYPE

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
        "results.ipynb",
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


def cell_text(executed: dict, cell_id: str) -> str:
    cell = next(c for c in executed["cells"] if c.get("id") == cell_id)
    return "".join("".join(out.get("text", "")) for out in cell.get("outputs", []))


def test_results(lab_server, tmp_path) -> None:
    """Search, wait, download the best checkpoint, load it in the kernel, evaluate: the loss
    computed there is the validation loss the master stored for that checkpoint."""
    executed, log = run_notebook(lab_server, "results.ipynb", tmp_path / "work")
    assert cell_error(executed) is None, log
    experiment = experiment_named(lab_server, "results-digits")
    answer = lab_server.wait_experiment(experiment["id"])
    assert answer["experiment"]["state"] == "COMPLETED"
    assert len(answer["trials"]) == 2
    checkpoints = lab_server.api("GET", f"experiments/{experiment['id']}/checkpoints")
    by_uuid = {c["uuid"]: c for c in checkpoints["checkpoints"]}
    best_line = cell_text(executed, "r07").splitlines()[0]  # "checkpoint UUID of trial N: ..."
    uuid = best_line.split()[1]
    stored = by_uuid[uuid]["validation_metrics"]["validation_loss"]
    assert stored == min(
        c["validation_metrics"]["validation_loss"]
        for c in by_uuid.values()
        if c["state"] == "COMPLETED" and c.get("validation_metrics")
    )
    here = cell_text(executed, "r10")
    computed = float(here.split("here: validation_loss ")[1].split(",")[0])
    assert computed == pytest.approx(stored, abs=1e-5), here
    # Downloaded into the user's cache, outside the notebook's directory (its context).
    downloaded = Path(cell_text(executed, "r07").split("downloaded to ")[1].split()[0])
    assert downloaded.parts[-3:] == ("determined", "checkpoints", uuid), downloaded
    assert (downloaded / "state_dict.pth").is_file()
    assert not (tmp_path / "work" / "checkpoints" / uuid).exists()

    # "Use in notebook" for that checkpoint: its cell, run as is in a fresh directory (as a
    # new notebook's kernel would), downloads it, fetches the experiment's code and loads it.
    snippet = lab_server.api("GET", f"checkpoints/{uuid}/snippet")
    assert snippet["kind"] == "pytorch"
    check = """
import torch
from model_def import digits_tensors

X, y = digits_tensors(train=False)
with torch.no_grad():
    output = models[0].eval()(X)
print("LOADED", type(trial).__name__, torch.nn.functional.cross_entropy(output, y).item())
"""
    shown = run_snippet(lab_server, uuid, tmp_path / "fresh", check)
    class_name, loaded_loss = shown.split("LOADED ")[1].split()
    assert class_name == "DigitsTrial"
    assert float(loaded_loss) == pytest.approx(stored, abs=1e-5)


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


def run_snippet(lab_server, uuid: str, directory: Path, check: str) -> str:
    """Run the checkpoint's "Use in notebook" cell, then `check`, in a new process in
    `directory` with a kernel's environment; returns its stdout."""
    directory.mkdir()
    snippet = lab_server.api("GET", f"checkpoints/{uuid}/snippet")
    completed = subprocess.run(
        [sys.executable, "-c", snippet["code"] + check],
        cwd=directory,
        env=lab_server.kernel_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def test_keras_native(lab_server, tmp_path) -> None:
    answer = _native_notebook(lab_server, tmp_path, "keras_native.ipynb", "keras-native-digits")
    assert answer["trials"][0]["steps_completed"] == 8
    assert answer["experiment"]["best_validation"] is not None
    # Its checkpoint's "Use in notebook" cell loads the Keras model, which predicts digits.
    experiment_id = answer["experiment"]["id"]
    [checkpoint, *_] = lab_server.api("GET", f"experiments/{experiment_id}/checkpoints")[
        "checkpoints"
    ]
    assert lab_server.api("GET", f"checkpoints/{checkpoint['uuid']}/snippet")["kind"] == "keras"
    shown = run_snippet(
        lab_server,
        checkpoint["uuid"],
        tmp_path / "keras-snippet",
        "\nimport numpy as np\nprint('PREDICTS', model.predict(np.zeros((2, 64)), verbose=0).shape)\n",
    )
    assert "PREDICTS (2, 10)" in shown


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
