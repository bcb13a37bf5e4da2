"""`det.experimental.create(TrialClass, ...)` called in a notebook behaves as
`det.experimental.keras.init()` does there: the notebook is submitted, the experiment's widget
is shown, `last` names it, and the cell stops with one line (later code does not run)."""

from __future__ import annotations

import pytest
from traitlets.config import Config

import jupyter_determined.kernel._widget
from determined.experimental import _create
from jupyter_determined.kernel._current_notebook import frontend_notebook
from jupyter_determined.kernel._magics import NotebookSubmitted, last_experiment_id
from tests._support import MasterProcess

pytestmark = pytest.mark.slow

TRIAL_CELL = """\
import determined as det
from determined import pytorch

class TinyTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
"""
CONFIG_CELL = """\
config = {"name": "create-in-a-notebook", "max_restarts": 0,
          "hyperparameters": {"global_batch_size": 4},
          "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}}}
"""


@pytest.fixture
def master(tmp_path, monkeypatch):
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        monkeypatch.setenv("DET_MASTER", master.url)
        monkeypatch.setenv("DET_MASTER_TOKEN", master.token)
        yield master


@pytest.fixture
def shell(master, monkeypatch, tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(frontend_notebook, "snapshot", None)
    # What a kernel started by Jupyter is (`is_jupyter()` reads ipykernel's argv).
    monkeypatch.setattr(_create, "is_jupyter", lambda: True)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    instance = InteractiveShell.instance(config=config)
    (tmp_path / "ctx").mkdir()
    instance.user_ns["CTX"] = str(tmp_path / "ctx")
    assert instance.run_cell("%load_ext jupyter_determined", store_history=True).success
    yield instance
    InteractiveShell.clear_instance()


def test_create_in_a_notebook_shows_the_widget_sets_last_and_stops_the_cell(
    shell, master, monkeypatch, capsys
):
    shown: list[int] = []
    monkeypatch.setattr(
        jupyter_determined.kernel._widget,
        "show_experiment",
        lambda experiment_id, **kwargs: shown.append(experiment_id),
    )
    assert shell.run_cell(TRIAL_CELL, store_history=True).success
    assert shell.run_cell(CONFIG_CELL, store_history=True).success
    result = shell.run_cell(
        "experiment_id = det.experimental.create(TinyTrial, config, "
        "context_dir=CTX)\nprint('later code ran')",
        store_history=True,
    )

    assert isinstance(result.error_in_exec, NotebookSubmitted)
    experiment_id = result.error_in_exec.experiment_id
    out = capsys.readouterr()
    shown_text = out.out + out.err
    assert f"Submitted experiment {experiment_id}" in shown_text
    assert "later code ran" not in shown_text and "Traceback" not in shown_text
    assert "experiment_id" not in shell.user_ns  # the cell stopped inside create()
    assert shown == [experiment_id]  # the widget appeared under the cell
    assert last_experiment_id() == experiment_id

    assert shell.run_cell("%det widget last", store_history=True).success
    assert shown == [experiment_id, experiment_id]
    experiment = master.session.get(f"/experiments/{experiment_id}")["experiment"]
    assert experiment["name"] == "create-in-a-notebook"
    assert "class TinyTrial" in experiment["notebook"]["script"]
    master.session.post(f"/experiments/{experiment_id}/kill")
