""" "Use in notebook" in a real JupyterLab (Chromium): the button of a checkpoint inserts the
cell that downloads and loads it into the notebook, and that cell runs in the notebook's kernel.

From the experiment's tab (the notebook used last gets the cell) and from the live widget under
a notebook cell (its own notebook gets it). The PyTorch cell is run for real, loading the trial,
in tests/jupyter/test_notebooks.py::test_results; here the checkpoints are a Core API script's,
whose cell lists the files it saved. Screenshots (light and dark) go to docs/images/.
Also: an experiment deleted (`det e delete`) leaves the sidebar's list at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests._support import context_tarball

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
WIDGET = ".jp-Det-notebookWidget"
SAVES_A_CHECKPOINT = """\
import pathlib
import determined as det

with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        core_context.train.report_validation_metrics(steps_completed=op.length,
                                                     metrics={"loss": 0.25})
        with core_context.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
            (pathlib.Path(path) / "weights_saved_by_core.txt").write_text("w")
        op.report_completed(0.25)
"""
CONFIG = {
    "name": "use-in-notebook",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 2},
}

# The sources of the cells of the first notebook in the main area, through its shared model.
NOTEBOOK_CELLS = """name => {
    for (const widget of window.jupyterapp.shell.widgets('main')) {
        const context = widget.context;
        if (context && context.path === name && widget.content && widget.content.model) {
            return widget.content.model.sharedModel.cells.map(cell => cell.getSource());
        }
    }
    return null;
}"""


def _shoot(page: Any, name: str, selector: str) -> None:
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    page.locator(selector).first.scroll_into_view_if_needed()
    page.locator(selector).first.screenshot(path=str(DOC_IMAGES / f"{name}.png"))


def _theme(page: Any, theme: str) -> None:
    page.evaluate(
        "async theme => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme}); }",
        theme,
    )
    light = "true" if theme == "JupyterLab Light" else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")


def _completed_experiment(lab: Lab) -> tuple[int, str]:
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": CONFIG, "context": context_tarball({"train.py": SAVES_A_CHECKPOINT})},
    )["experiment"]["id"]
    lab.wait_for(
        "the experiment to complete",
        lambda: (
            lab.api("GET", f"experiments/{experiment_id}")["experiment"]["state"] == "COMPLETED"
        ),
        timeout=180,
    )
    [checkpoint] = lab.api("GET", f"experiments/{experiment_id}/checkpoints")["checkpoints"]
    return experiment_id, checkpoint["uuid"]


def _cells(page: Any, name: str) -> list[str]:
    return page.evaluate(NOTEBOOK_CELLS, name) or []


def _run_active_cell_of(page: Any, lab: Lab, name: str) -> str:
    """Bring the notebook forward, run its active cell, and return that cell's output text."""
    page.click(f"#jp-main-dock-panel .lm-TabBar-tab:has-text('{name}')")
    page.evaluate("async () => { await window.jupyterapp.commands.execute('notebook:run-cell'); }")
    output = ".jp-Notebook .jp-Cell.jp-mod-active .jp-OutputArea-output"
    page.wait_for_selector(f"{output}:has-text('weights_saved_by_core.txt')", timeout=120_000)
    return page.inner_text(output)


def test_use_in_notebook_from_the_experiment_tab(page, lab: Lab) -> None:
    experiment_id, uuid = _completed_experiment(lab)
    lab.write_notebook("use.ipynb", ["x = 1"])
    lab.open_notebook(page, "use.ipynb")
    page.evaluate(
        "async id => { await window.jupyterapp.commands.execute("
        "'determined:open-experiment', {id}); }",
        experiment_id,
    )
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    page.click(f'{view} .jp-Det-tab[data-section="checkpoints"]')
    button = f'{view} .jp-Det-useInNotebook[data-uuid="{uuid}"]'
    page.wait_for_selector(button)
    _shoot(page, "use-in-notebook", view)
    _theme(page, "JupyterLab Dark")
    _shoot(page, "use-in-notebook-dark", view)
    _theme(page, "JupyterLab Light")

    page.click(button)
    # The experiment records no notebook (made through the API): the user picks one.
    page.click(".jp-Dialog .jp-mod-accept")
    lab.wait_for("the inserted cell", lambda: len(_cells(page, "use.ipynb")) == 2, timeout=30)
    first, inserted = _cells(page, "use.ipynb")
    assert first == "x = 1"  # inserted below the active cell, which was the only one
    assert f'client.get_checkpoint("{uuid}")' in inserted
    assert "path = checkpoint.download()" in inserted
    page.wait_for_selector("text=Inserted a cell into use.ipynb")

    # The cell runs in the notebook's kernel: it downloads the checkpoint and lists its files.
    shown = _run_active_cell_of(page, lab, "use.ipynb")
    assert "weights_saved_by_core.txt" in shown
    _shoot(page, "use-in-notebook-cell", ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
    # Downloaded into the user's cache, not into the notebook's directory (a later context).
    assert not (lab.notebook_dir / "checkpoints").exists()


def test_use_in_notebook_from_the_live_widget_inserts_into_its_own_notebook(page, lab: Lab) -> None:
    config = {**CONFIG, "name": "use-in-notebook-widget"}
    lab.write_notebook(
        "widget.ipynb",
        [
            "%load_ext jupyter_determined",
            f"config = {config!r}",
            "%%det_submit config --wait\n" + SAVES_A_CHECKPOINT,
        ],
    )
    lab.open_notebook(page, "widget.ipynb")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_selector(WIDGET, timeout=240_000)
    experiment_id = int(page.get_attribute(WIDGET, "data-experiment-id"))
    lab.wait_for(
        "the experiment to complete",
        lambda: (
            lab.api("GET", f"experiments/{experiment_id}")["experiment"]["state"] == "COMPLETED"
        ),
        timeout=180,
    )
    [checkpoint] = lab.api("GET", f"experiments/{experiment_id}/checkpoints")["checkpoints"]
    uuid = checkpoint["uuid"]
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)

    page.click(f'{WIDGET} .jp-Det-tab[data-section="checkpoints"]')
    button = f'{WIDGET} .jp-Det-useInNotebook[data-uuid="{uuid}"]'
    page.wait_for_selector(button)
    _shoot(page, "use-in-notebook-widget", WIDGET)
    page.click(button)
    lab.wait_for("the inserted cell", lambda: len(_cells(page, "widget.ipynb")) == 4, timeout=30)
    inserted = [c for c in _cells(page, "widget.ipynb") if "client.get_checkpoint" in c]
    assert len(inserted) == 1 and f'"{uuid}"' in inserted[0]
    # Below the submitting cell, so no later submission of it exports the cell.
    assert _cells(page, "widget.ipynb")[3] == inserted[0]
    assert "weights_saved_by_core.txt" in _run_active_cell_of(page, lab, "widget.ipynb")


def test_a_deleted_experiment_leaves_the_sidebar_list(page, lab: Lab) -> None:
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": {**CONFIG, "name": "to-be-deleted"}, "activate": False},
    )["experiment"]["id"]
    lab.api("POST", f"experiments/{experiment_id}/kill")
    lab.open_in(page)
    if not page.is_visible("#jupyter-determined-sidebar"):
        page.click('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="jupyter-determined-sidebar"]')
    row = f'.jp-Det-expRow[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(row)
    page.wait_for_selector("#jupyter-determined-sidebar :text('● live')")
    assert lab.api("DELETE", f"experiments/{experiment_id}")["id"] == experiment_id
    page.wait_for_selector(row, state="detached", timeout=10_000)
