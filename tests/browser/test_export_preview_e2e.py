"""Export you can see, in a real JupyterLab driven through Chromium: "Preview export" lists every
cell with whether it goes into the trial's script; one click on a cell's det-skip toggle leaves
it out (the preview says so, live); the context menu's "Determined: Toggle det-skip" brings it
back; the Submit dialog shows the same preview, and the experiment it submits holds exactly the
cells the preview listed. Screenshots (light and dark) go to docs/images/ for docs/jupyter.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests._support.browser import set_theme

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

REPO = Path(__file__).resolve().parents[2]
DOC_IMAGES = REPO / "docs" / "images"
PANEL = ".jp-Det-exportPreviewPanel .jp-Det-exportPreview"
DIALOG = ".jp-Dialog .jp-Det-exportPreview"
CELLS = [
    "%load_ext jupyter_determined",
    "import math\n!pip list\nscale = 2",
    "scratch = undefined_name  # exploring: would break every trial",
    "%%det_submit\nprint('scaled', scale * 21)",
]


def row(scope: str, cell_id: str) -> str:
    return f"{scope} .jp-Det-xpCell[data-cell-id='{cell_id}']"


def wait_row(page: Any, scope: str, cell_id: str, status: str, reason: str = "") -> None:
    selector = row(scope, cell_id) + f"[data-status='{status}']"
    if reason:
        selector += f"[data-reason='{reason}']"
    page.wait_for_selector(selector, timeout=15_000)


def notebook_cell(page: Any, index: int) -> Any:
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").nth(index)


def shoot(page: Any, name: str) -> Path:
    """A screenshot of the whole window, into docs/images/ (docs/jupyter.md shows it)."""
    # Not conftest's helper: in a whole-suite run `import conftest` may name another folder's.
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    path = DOC_IMAGES / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def test_det_skip_toggle_and_preview(page, lab: Lab, extension_page_errors) -> None:
    lab.write_notebook("preview.ipynb", CELLS)
    lab.open_notebook(page, "preview.ipynb")
    page.click(".jp-Det-previewButton")
    page.wait_for_selector(f"{PANEL}[data-state='failing'], {PANEL}[data-state='ready']")
    # The notebook's only submitting cell is previewed: the cells above it plus its body.
    assert "What %%det_submit in cell 4 exports" in page.inner_text(f"{PANEL} .jp-Det-xpHeading")
    wait_row(page, PANEL, "cell-0", "exported")
    wait_row(page, PANEL, "cell-2", "exported")
    wait_row(page, PANEL, "cell-3", "training")
    warnings = page.inner_text(row(PANEL, "cell-1") + " .jp-Det-xpWarnings")
    assert "shell command dropped (it does not run in the trial): !pip list" in warnings

    # One click on the scratch cell's toggle (it shows when the pointer is over the cell).
    scratch = notebook_cell(page, 2)
    toggle = scratch.locator(".jp-Det-skipToggle")
    assert toggle.get_attribute("aria-pressed") == "false"
    toggle.click()
    # The toggles follow the cell's tags on the next animation frame.
    scratch.locator(".jp-Det-skipToggle[aria-pressed='true']").wait_for()
    assert toggle.inner_text() == "det-skip"
    assert "jp-Det-skipped" in (scratch.get_attribute("class") or "")
    wait_row(page, PANEL, "cell-2", "left_out", "det-skip")
    assert page.inner_text(row(PANEL, "cell-2") + " .jp-Det-xpNote") == "tagged det-skip"
    assert "undefined_name" not in page.inner_text(f"{PANEL} .jp-Det-xpScript pre")
    page.mouse.move(5, 400)  # no hover effects in the pictures
    shoot(page, "export-preview")
    set_theme(page, "JupyterLab Dark")
    shoot(page, "export-preview-dark")
    set_theme(page, "JupyterLab Light")

    # The context menu's command brings it back; the badge and the preview follow.
    scratch.locator(".jp-InputArea-editor").click(button="right")
    page.click(".lm-Menu-item:has-text('Determined: Toggle det-skip')")
    page.wait_for_function(
        "() => !document.querySelectorAll('.jp-Notebook .jp-Cell')[2]"
        ".classList.contains('jp-Det-skipped')",
        timeout=10_000,
    )
    wait_row(page, PANEL, "cell-2", "exported")
    # ... and the preview's own "Skip" button leaves it out again.
    page.click(row(PANEL, "cell-2") + " .jp-Det-xpSkip[data-action='skip']")
    wait_row(page, PANEL, "cell-2", "left_out", "det-skip")
    assert toggle.get_attribute("aria-pressed") == "true"
    # A row's cell label selects that cell in the notebook.
    page.click(row(PANEL, "cell-1") + " .jp-Det-xpIndex")
    page.wait_for_function(
        "() => document.querySelectorAll('.jp-Notebook .jp-Cell')[1]"
        ".classList.contains('jp-mod-active')",
        timeout=10_000,
    )
    assert not extension_page_errors()


def test_the_submit_dialog_previews_what_it_submits(page, lab: Lab) -> None:
    lab.write_notebook("dialog.ipynb", CELLS)
    lab.open_notebook(page, "dialog.ipynb")
    notebook_cell(page, 2).locator(".jp-Det-skipToggle").click()  # one click: det-skip
    page.click(".jp-Det-submitButton")
    page.wait_for_selector(f"{DIALOG}[data-state='ready']")
    # The toolbar sends the whole notebook: %%det_submit cells are other experiments' code.
    assert "the whole notebook" in page.inner_text(f"{DIALOG} .jp-Det-xpHeading")
    wait_row(page, DIALOG, "cell-1", "exported")
    wait_row(page, DIALOG, "cell-2", "left_out", "det-skip")
    wait_row(page, DIALOG, "cell-3", "left_out", "det_submit")
    shoot(page, "submit-dialog-preview")

    page.click(".jp-Dialog .jp-mod-accept")  # Submit
    page.wait_for_selector(".jp-Det-openCreated", timeout=60_000)
    experiment_id = int(page.inner_text(".jp-Det-openCreated").split()[-1])
    page.click(".jp-Dialog .jp-mod-accept")  # Close
    notebook = lab.api("GET", f"experiments/{experiment_id}")["experiment"]["notebook"]
    assert notebook["cell_ids"] == ["cell-0", "cell-1"]  # what the preview listed as going in
    assert "undefined_name" not in notebook["script"]
    lab.wait_for(
        "the experiment to end",
        lambda: (
            lab.api("GET", f"experiments/{experiment_id}")["experiment"]["state"]
            in ("COMPLETED", "CANCELED", "ERROR")
        ),
        timeout=120,
    )
