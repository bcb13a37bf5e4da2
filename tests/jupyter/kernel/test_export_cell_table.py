"""The export records where each notebook cell went in the script, and a failing
`%%det_submit` trial names the notebook cell and line (traceback and `notebook_error`)."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from jupyter_determined import cells_to_script


def cell(source: str, cell_id: str, tags: list[str] | None = None, count: int | None = None):
    made = new_code_cell(source, execution_count=count)
    made["id"] = cell_id
    if tags:
        made.metadata["tags"] = tags
    return made


def markdown(source: str, cell_id: str):
    made = new_markdown_cell(source)
    made["id"] = cell_id
    return made


def test_each_cell_records_its_index_count_and_place_in_the_script() -> None:
    cells = [
        markdown("# Title", "m0"),
        cell("a = 1\nb = 2", "one", count=3),
        cell("print('here only')", "skip", tags=["det-skip"]),
        markdown("text", "m1"),
        cell("%cd /tmp\nc = a + b\nprint(c)", "two"),
        cell("%%time\nd = c * 2\n\ne = d\n", "timed", count=9),
    ]
    exported = cells_to_script(
        cells,
        training_code="train()\n",
        training_cell_id="sub",
        training_cell_index=7,
        training_execution_count=12,
        notebook_path="/w/nb.ipynb",
    )
    by_id = {c.id: c for c in exported.cells}
    assert [c.id for c in exported.cells] == ["one", "two", "timed", "sub"]
    assert [c.index for c in exported.cells] == [1, 4, 5, 7]  # markdown and det-skip count
    assert [c.execution_count for c in exported.cells] == [3, None, 9, 12]
    lines = exported.script.splitlines()
    for exported_cell, source in ((by_id["one"], "a = 1\nb = 2"), (by_id["sub"], "train()")):
        assert exported_cell.line_map is None
        for number, text in enumerate(source.splitlines(), start=1):
            assert lines[exported_cell.line_offset + number - 1] == text
    two = by_id["two"]  # a line magic keeps its line: still 1:1
    assert two.line_map is None and lines[two.line_offset + 2 - 1] == "c = a + b"
    timed = by_id["timed"]  # the %%time line is gone: script lines map to cell lines 2..4
    assert timed.line_map == [2, 3, 4]
    assert lines[timed.line_offset] == "d = c * 2" and lines[timed.line_offset + 2] == "e = d"
    field = exported.notebook_field()
    assert field["cells"][0] == {
        "id": "one",
        "index": 1,
        "execution_count": 3,
        "line_offset": by_id["one"].line_offset,
        "num_lines": 2,
        "code_number": 1,
        "first_line": "a = 1",
    }
    # The banner names a cell by the number a person counts to among the code cells (the
    # skipped one too) and by its first line as shown.
    assert [c.code_number for c in exported.cells] == [1, 3, 4, 5]
    assert [c.first_line for c in exported.cells] == ["a = 1", "%cd /tmp", "%%time", "train()"]
    assert field["cells"][2]["line_map"] == [2, 3, 4]
    # The prelude carries the same table to the trial.
    assert "notebook_errors" in exported.script and "'line_map': [2, 3, 4]" in exported.script
    compile(exported.script, "_det_notebook_cell.py", "exec")


def run(shell, source: str) -> None:
    result = shell.run_cell(source, store_history=True)
    if not result.success:
        raise result.error_in_exec or result.error_before_exec


EXPORT = (
    "from jupyter_determined.kernel._current_notebook import current_notebook_export\n"
    "exported = current_notebook_export(which='above_current', training_code='go()')"
)


def test_the_submitting_cell_gets_its_notebook_index_and_the_kernels_count(
    shell, tmp_path, monkeypatch
) -> None:
    path = tmp_path / "saved.ipynb"
    nbformat.write(
        new_notebook(
            cells=[markdown("# T", "m"), cell("a = 1", "first", count=1), cell(EXPORT, "submit")]
        ),
        path,
    )
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    run(shell, "a = 1")
    run(shell, EXPORT)
    exported = shell.user_ns["exported"]
    assert exported.source == "file"
    [first, submit] = exported.cells
    assert (first.id, first.index, first.execution_count) == ("first", 1, 1)
    assert (submit.id, submit.index, submit.execution_count) == ("submit", 2, 2)


def test_history_cells_carry_their_execution_counts(shell) -> None:
    run(shell, "x = 1")
    run(shell, "y = 2")
    run(shell, EXPORT)
    exported = shell.user_ns["exported"]
    assert [(c.id, c.index, c.execution_count) for c in exported.cells] == [
        ("history-1", 0, 1),
        ("history-2", 1, 2),
        ("history-3", 2, 3),
    ]


@pytest.mark.slow
def test_a_failing_det_submit_trial_names_the_notebook_cell(shell, tmp_path, monkeypatch) -> None:
    from tests._support import MasterProcess, wait_for_experiment, wait_until

    body = "scale = 2\ncheck(scale)\n"
    cells = [
        markdown("# Failing", "intro"),
        cell(
            "def check(value):\n    if value > 1:\n        raise ValueError(f'too big: {value}')\n",
            "helpers",
            count=1,
        ),
        cell("%%det_submit --context $CTX --no-widget\n" + body, "submit"),
    ]
    path = tmp_path / "failing.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    (tmp_path / "ctx").mkdir()
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        monkeypatch.setenv("DET_MASTER", master.url)
        monkeypatch.setenv("DET_MASTER_TOKEN", master.token)
        monkeypatch.setenv("JPY_SESSION_NAME", str(path))
        shell.user_ns["CTX"] = str(tmp_path / "ctx")
        run(shell, "%load_ext jupyter_determined")
        run(shell, cells[1]["source"])
        run(shell, cells[2]["source"])
        experiments = master.session.get("/experiments")["experiments"]
        experiment = wait_for_experiment(master, experiments[-1]["id"])
        assert experiment["state"] == "ERROR"

        def reported() -> list[dict] | None:
            found = master.trials(experiment["id"])
            return found if found and found[0]["notebook_error"] is not None else None

        # the trial's end and its JSON are written together; be patient anyway
        [trial] = wait_until(reported, 10, "the trial's notebook error", 0.1)
        assert trial["notebook_error"] == {
            "notebook": str(path),
            "cell_id": "helpers",
            "cell_index": 1,
            "line": 3,
            "exception": "ValueError: too big: 2",
            # The file says 1, but this kernel ran it as [2]: the number its prompt shows.
            "execution_count": 2,
            "code_number": 1,
            "first_line": "def check(value):",
        }
        assert trial["exit_summary"] == "exited with code 1"
        logs = "\n".join(master.logs(trial["id"]))
        assert 'File "Cell In[3]", line 3, in <module>' in logs
        assert 'File "Cell In[2]", line 3, in check' in logs
        assert logs.count("Traceback (most recent call last)") == 1, logs
        assert '_det_notebook_cell.py", line' not in logs


FAILING_TRIAL = """\
import torch
from determined import pytorch

class FailingTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(torch.nn.Linear(2, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

    def build_training_data_loader(self):
        return pytorch.DataLoader(torch.utils.data.TensorDataset(torch.zeros(8, 2)), batch_size=4)

    def build_validation_data_loader(self):
        return pytorch.DataLoader(torch.utils.data.TensorDataset(torch.zeros(8, 2)), batch_size=4)

    def train_batch(self, batch, epoch_idx, batch_idx):
        raise ValueError(f"bad batch {batch_idx}")

    def evaluate_batch(self, batch):
        return {"loss": 0.0}
"""


@pytest.mark.slow
def test_a_native_trial_failing_in_the_harness_names_the_notebook_cell(
    tmp_path, monkeypatch
) -> None:
    """create() in a notebook: the notebook's script runs under determined.exec.native, and
    the error comes from a method the PyTorch harness calls, after the script was loaded."""
    from determined.experimental._native import submit_native
    from tests._support import MasterProcess, wait_for_experiment

    cells = [
        markdown("# Native", "intro"),
        cell(FAILING_TRIAL, "trial", count=2),
        cell(
            "import determined as det\nconfig = {}\n"
            "det.experimental.create(FailingTrial, config, context_dir='.')\n",
            "submit",
        ),
    ]
    exported = cells_to_script(cells, notebook_path="/w/native.ipynb")
    context = tmp_path / "ctx"
    context.mkdir()
    config = {
        "name": "native-failing",
        "max_restarts": 0,
        "hyperparameters": {"global_batch_size": 4},
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 2}},
    }
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        monkeypatch.setenv("DET_MASTER_TOKEN", master.token)
        experiment_id = submit_native(
            config,
            str(context),
            ["native__det__.py"],
            master_url=master.url,
            extra_files={"native__det__.py": exported.script.encode()},
        )
        experiment = wait_for_experiment(master, experiment_id, timeout=180)
        [trial] = master.trials(experiment_id)
        logs = "\n".join(master.logs(trial["id"]))
        assert experiment["state"] == "ERROR", logs
        assert trial["notebook_error"] == {
            "notebook": "/w/native.ipynb",
            "cell_id": "trial",
            "cell_index": 1,
            "line": 17,
            "exception": "ValueError: bad batch 0",
            "execution_count": 2,
            "code_number": 1,
            "first_line": "import torch",
        }, logs
        assert 'File "Cell In[2]", line 17, in train_batch' in logs


def test_cells_get_the_counts_their_prompts_show_though_the_frontend_sends_none(
    shell, monkeypatch
) -> None:
    """A run-all sends the frontend's snapshot before the cells run, so it has no counts; the
    kernel knows them (by cell id, and by source for cells that ran before `%load_ext`)."""
    from jupyter_determined.kernel._current_notebook import cell_counts, frontend_notebook

    shell.run_cell("early = 1", store_history=True, cell_id="early")  # before %load_ext
    cell_counts.register(shell)
    shell.run_cell("a = 1", store_history=True, cell_id="first")
    shell.run_cell("b = 2", store_history=True, cell_id="second")
    shell.run_cell("a = 10  # run again: prompt shows [4]", store_history=True, cell_id="first")
    snapshot_cells = [
        {"cell_type": "code", "id": "early", "source": "early = 1"},
        {
            "cell_type": "code",
            "id": "first",
            "source": "a = 10  # run again: prompt shows [4]",
        },
        {"cell_type": "markdown", "id": "m", "source": "text"},
        {"cell_type": "code", "id": "second", "source": "b = 2"},
        {"cell_type": "code", "id": "idle", "source": "never = 0"},
        {"cell_type": "code", "id": "submit", "source": EXPORT},
    ]
    monkeypatch.setattr(
        frontend_notebook, "snapshot", {"path": "/w/nb.ipynb", "cells": snapshot_cells}
    )
    shell.run_cell(EXPORT, store_history=True, cell_id="submit")
    exported = shell.user_ns["exported"]
    assert exported.source == "frontend"
    assert [(c.id, c.execution_count) for c in exported.cells] == [
        ("early", 1),
        ("first", 4),
        ("second", 3),
        ("idle", None),
        ("submit", 5),
    ]
