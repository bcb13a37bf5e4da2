"""Issue 28 item 4 in a real JupyterLab (Chromium): a Native API config that cannot run is
refused in the cell that submits it, at once, with the problem and what to add.

Before, `det.experimental.keras.init()` without `global_batch_size` submitted the notebook; ten
seconds later the widget said only "exited with code 1" and the reason sat in the trial's log
under TensorFlow's noise. Now the cell's output names the missing field and how to set it, no
traceback, and nothing is submitted (the check runs before TensorFlow would be imported).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

NATIVE_CELL = """\
import determined as det
config = {"searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": 10}}}
context = det.experimental.keras.init(config, context_dir=".")
"""
OUTPUT = ".jp-Cell:nth-child(2) .jp-OutputArea-output"


def test_a_native_config_without_global_batch_size_is_refused_in_its_cell(page, lab: Lab) -> None:
    lab.write_notebook("native-check.ipynb", ["%load_ext jupyter_determined", NATIVE_CELL])
    lab.open_notebook(page, "native-check.ipynb")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_selector(f"{OUTPUT}:has-text('global_batch_size')", timeout=120_000)
    shown = page.inner_text(OUTPUT)
    assert "hyperparameters.global_batch_size: required" in shown, shown
    assert "add e.g. `global_batch_size: 32` under hyperparameters" in shown, shown
    assert "Traceback" not in shown and "_native.py" not in shown, shown
    # Refused before submitting: the master has no experiment, so no widget either.
    assert lab.api("GET", "experiments")["experiments"] == []
    assert page.locator(".jp-Det-notebookWidget").count() == 0
