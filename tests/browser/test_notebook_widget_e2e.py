"""The experiment widget under a notebook cell, in a real JupyterLab driven through Chromium.

What a person relies on: its buttons act while a `--wait` cell blocks the kernel; it ends in the
right state after a flood of output; it says when the master is gone and comes back by itself;
a saved notebook shows it again without its kernel (and shows the saved snapshot where the
master does not know the experiment); it is legible in the dark theme. The screenshots it takes
go to docs/images/ (docs/jupyter.md shows them), so the docs show what the code does.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

REPO = Path(__file__).resolve().parents[2]
DOC_IMAGES = REPO / "docs" / "images"
WIDGET = ".jp-Det-notebookWidget"
PAUSABLE = """\
import time
import determined as det

with det.core.init() as core_context:
    steps = 0
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            time.sleep(0.1)
            core_context.train.report_training_metrics(steps_completed=steps,
                                                       metrics={"loss": 1.0 / steps})
            if steps % 5 == 0:
                core_context.train.report_validation_metrics(steps_completed=steps,
                                                             metrics={"loss": 1.0 / steps})
                op.report_progress(steps)
                if core_context.preempt.should_preempt():
                    raise SystemExit(0)
        op.report_completed(1.0 / steps)
"""


def config_cell(name: str, max_length: int) -> str:
    return (
        f"config = {{'name': {name!r}, 'max_restarts': 0, 'searcher': {{'name': 'single', "
        f"'metric': 'loss', 'smaller_is_better': True, 'max_length': {max_length}}}}}"
    )


def run_all(page: Any) -> None:
    """Start running every cell (not awaited: run-all resolves only when the cells finish)."""
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def wait_for_widget(page: Any, lab: Lab, timeout: float = 240) -> int:
    """The experiment id of the widget that appears under a cell."""
    page.wait_for_selector(WIDGET, timeout=timeout * 1000)
    return int(page.get_attribute(WIDGET, "data-experiment-id"))


def run_in_notebook(page: Any, lab: Lab, name: str, cells: list[str], timeout: float = 240) -> int:
    """Write a notebook of `cells`, open it, run all, and return the id its widget shows."""
    lab.write_notebook(name, cells)
    lab.open_notebook(page, name)
    run_all(page)
    return wait_for_widget(page, lab, timeout)


def experiment(lab: Lab, experiment_id: int) -> dict:
    return lab.api("GET", f"experiments/{experiment_id}")


def shoot(page: Any, name: str, selector: str = WIDGET) -> Path:
    """A screenshot of the widget (docs/images/<name>.png), scrolled into view."""
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    path = DOC_IMAGES / f"{name}.png"
    page.locator(selector).first.scroll_into_view_if_needed()
    page.locator(selector).first.screenshot(path=str(path))
    return path


def header_state(page: Any) -> str:
    return page.inner_text(f"{WIDGET} .jp-Det-expHeader .jp-Det-state")


def test_buttons_act_while_a_wait_cell_blocks_the_kernel(page, lab: Lab) -> None:
    experiment_id = run_in_notebook(
        page,
        lab,
        "wait.ipynb",
        [
            "%load_ext jupyter_determined",
            config_cell("pausable", 100_000),
            "%%det_submit config --wait\n" + PAUSABLE,
        ],
    )
    lab.wait_for(
        "the trial to report",
        lambda: any(t["steps_completed"] > 0 for t in experiment(lab, experiment_id)["trials"]),
        timeout=90,
    )
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus[data-connection='live']")
    # The cell is still running: the kernel is busy, so only the browser can act now.
    assert page.get_attribute(".jp-Notebook-ExecutionIndicator", "data-status") == "busy"
    page.wait_for_selector(f"{WIDGET} .jp-Det-action-pause:not([disabled])")
    shoot(page, "widget-running")

    page.click(f"{WIDGET} .jp-Det-action-pause")
    lab.wait_for(
        "PAUSED after the click",
        lambda: experiment(lab, experiment_id)["experiment"]["state"] == "PAUSED",
        timeout=30,
        interval=0.05,
    )
    page.wait_for_function(
        f"() => document.querySelector('{WIDGET} .jp-Det-expHeader').innerText.includes('PAUSED')",
        timeout=10_000,
    )

    page.click(f"{WIDGET} .jp-Det-action-activate")
    lab.wait_for(
        "ACTIVE again",
        lambda: experiment(lab, experiment_id)["experiment"]["state"] == "ACTIVE",
        timeout=30,
        interval=0.05,
    )

    page.click(f"{WIDGET} .jp-Det-action-kill")
    dialog = page.wait_for_selector(".jp-Dialog")  # Kill cannot be undone: it asks first
    assert "cannot be undone" in dialog.inner_text()
    page.click(".jp-Dialog .jp-mod-accept")
    lab.wait_for(
        "the kill after the confirmation",
        lambda: (
            experiment(lab, experiment_id)["experiment"]["state"]
            in ("STOPPING_CANCELED", "CANCELED")
        ),
        timeout=30,
        interval=0.05,
    )
    # The waiting cell sees the end and returns; the widget shows the final state.
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
    assert f"Experiment {experiment_id} CANCELED" in page.inner_text(".jp-Notebook")
    page.wait_for_selector(
        f"{WIDGET} .jp-Det-nbStatus:has-text('Finished (CANCELED)')", timeout=30_000
    )
    assert page.is_disabled(f"{WIDGET} .jp-Det-action-kill")


FLOOD = """\
import determined as det

with det.core.init() as core_context:
    for i in range(200_000):
        print(f"line {i}")
    print("".join(str(i % 10) for i in range(20_000)))  # one 20,000-character line
    for op in core_context.searcher.operations():
        core_context.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.5})
        op.report_completed(0.5)
    print("the last line")
"""


def test_after_a_flood_of_output_the_widget_shows_the_end(page, lab: Lab) -> None:
    experiment_id = run_in_notebook(
        page,
        lab,
        "flood.ipynb",
        ["%load_ext jupyter_determined", config_cell("flood", 1), "%%det_submit config\n" + FLOOD],
    )
    page.wait_for_selector(
        f"{WIDGET} .jp-Det-nbStatus:has-text('Finished (COMPLETED)')", timeout=300_000
    )
    assert experiment(lab, experiment_id)["experiment"]["state"] == "COMPLETED"
    assert header_state(page) == "COMPLETED"
    assert (
        page.get_attribute(f"{WIDGET} .jp-Det-expHeader [role=progressbar]", "aria-valuenow")
        == "100"
    )
    assert page.is_disabled(f"{WIDGET} .jp-Det-action-kill")
    # The log tail is bounded and has no repeats; the long line is cut, the last line shown.
    lines = page.inner_text(f"{WIDGET} .jp-Det-nbLogs").splitlines()
    assert 0 < len(lines) <= 10
    assert len(set(lines)) == len(lines)
    assert max(len(line) for line in lines) < 500
    assert lines[-1].endswith("exited with code 0") or "the last line" in "\n".join(lines)
    shoot(page, "widget-completed")


def test_disconnected_while_the_server_is_down_and_back_after_restart(page, lab: Lab) -> None:
    experiment_id = run_in_notebook(
        page,
        lab,
        "restart.ipynb",
        [
            "%load_ext jupyter_determined",
            config_cell("survives", 100_000),
            "%%det_submit config\n" + PAUSABLE,
        ],
    )
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus[data-connection='live']", timeout=60_000)
    lab.stop()
    page.wait_for_selector(
        f"{WIDGET} .jp-Det-nbStatus[data-connection='disconnected']", timeout=60_000
    )
    assert "reconnecting" in page.inner_text(f"{WIDGET} .jp-Det-nbStatus")
    shoot(page, "widget-disconnected")
    lab.restart()
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus[data-connection='live']", timeout=90_000)
    assert experiment(lab, experiment_id)["experiment"]["state"] == "ACTIVE"
    lab.api("POST", f"experiments/{experiment_id}/kill")
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus:has-text('Finished')", timeout=90_000)


def test_a_saved_notebook_shows_the_widget_without_its_kernel(page, lab: Lab) -> None:
    experiment_id = run_in_notebook(
        page,
        lab,
        "saved.ipynb",
        [
            "%load_ext jupyter_determined",
            config_cell("saved", 10),
            "%%det_submit config --wait\n" + PAUSABLE,
        ],
    )
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:save'); }")
    shut_down_kernels(lab)
    assert saved_snapshot(lab, "saved.ipynb", 2)["experiment"]["state"] == "COMPLETED"
    saved = json.loads((lab.notebook_dir / "saved.ipynb").read_text())

    lab.open_notebook(page, "saved.ipynb")
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus:has-text('Finished (COMPLETED)')")
    assert header_state(page) == "COMPLETED"
    assert "Error displaying widget" not in page.inner_text(".jp-Notebook")

    # The same notebook where the master does not know the experiment (a colleague's, or
    # a master that was reset): the saved snapshot shows, and the widget says it is one.
    other = json.loads(json.dumps(saved))
    other_output = next(
        out
        for out in other["cells"][2]["outputs"]
        if "application/vnd.determined.experiment+json" in out.get("data", {})
    )
    data = other_output["data"]["application/vnd.determined.experiment+json"]
    data["experiment_id"] = data["snapshot"]["experiment"]["id"] = 424242
    for trial in data["snapshot"]["trials"]:
        trial["experiment_id"] = 424242
    (lab.notebook_dir / "elsewhere.ipynb").write_text(json.dumps(other))
    lab.open_notebook(page, "elsewhere.ipynb")
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus[data-connection='disconnected']")
    assert "not on this master" in page.inner_text(f"{WIDGET} .jp-Det-nbStatus")
    assert header_state(page) == "COMPLETED"
    assert page.locator(f"{WIDGET} .jp-Det-trialRow, {WIDGET} tbody tr").count() >= 1
    assert experiment_id != 424242


def shut_down_kernels(lab: Lab) -> None:
    """Shut down the notebooks' kernels; not the trials' (a `%%det_submit` trial of this server
    runs in a kernel of its own, listed beside them as a console session)."""
    headers = {"Authorization": f"token {lab.token}"}
    sessions = requests.get(f"{lab.base}api/sessions", headers=headers, timeout=30).json()
    for session in sessions:
        if session["type"] != "notebook":
            continue
        requests.delete(
            f"{lab.base}api/kernels/{session['kernel']['id']}", headers=headers, timeout=30
        ).raise_for_status()


def saved_snapshot(lab: Lab, name: str, cell: int) -> dict:
    saved = json.loads((lab.notebook_dir / name).read_text())
    [output] = [
        out
        for out in saved["cells"][cell]["outputs"]
        if "application/vnd.determined.experiment+json" in out.get("data", {})
    ]
    return output["data"]["application/vnd.determined.experiment+json"]["snapshot"]


def test_the_browser_saves_the_final_state_when_the_kernel_is_gone(page, lab: Lab) -> None:
    experiment_id = run_in_notebook(
        page,
        lab,
        "orphan.ipynb",
        [
            "%load_ext jupyter_determined",
            config_cell("orphan", 60),
            "%%det_submit config\n" + PAUSABLE,
        ],
    )
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    shut_down_kernels(lab)  # the kernel that displayed it never sees the end
    assert experiment(lab, experiment_id)["experiment"]["state"] == "ACTIVE"
    page.wait_for_selector(
        f"{WIDGET} .jp-Det-nbStatus:has-text('Finished (COMPLETED)')", timeout=120_000
    )
    page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:save'); }")
    snapshot = saved_snapshot(lab, "orphan.ipynb", 2)
    assert snapshot["experiment"]["state"] == "COMPLETED"
    assert snapshot["trials"][0]["state"] == "COMPLETED"


CURSOR = """() => {
    const notebook = window.jupyterapp.shell.currentWidget.content;
    const position = notebook.activeCell.editor.getCursorPosition();
    return [notebook.activeCellIndex, notebook.mode, position.line, position.column];
}"""


def set_theme(page: Any, theme: str) -> None:
    page.evaluate(
        "async theme => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme}); }",
        theme,
    )
    light = "true" if theme == "JupyterLab Light" else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")


def test_a_failing_trial_names_the_notebook_cell_and_line(page, lab: Lab) -> None:
    experiment_id = run_in_notebook(
        page,
        lab,
        "fails.ipynb",
        [
            "%load_ext jupyter_determined",
            "def rate(x):\n    return 1 / x",
            config_cell("fails", 10),
            "%%det_submit config\nimport determined as det\n"
            "with det.core.init() as core_context:\n    rate(0)",
        ],
    )
    banner = page.wait_for_selector(f"{WIDGET} .jp-Det-nbBanner-line", timeout=120_000)
    # The cell as its prompt shows it ([2]: the second to run), its line and its first line.
    expected = (
        r"Trial \d+ failed in \[2\], line 2 of the cell `def rate\(x\):`: "
        r"ZeroDivisionError: division by zero"
    )
    assert re.search(expected, banner.inner_text()), banner.inner_text()
    prompt = "() => window.jupyterapp.shell.currentWidget.content.widgets[1].model.executionCount"
    assert page.evaluate(prompt) == 2  # what its prompt shows: [2]
    # The banner comes with the trial's error; the experiment ends just after it.
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus:has-text('Finished (ERROR)')")
    assert experiment(lab, experiment_id)["experiment"]["state"] == "ERROR"
    shoot(page, "widget-error")

    # Go to cell: the cell selected, its editor in edit mode, the cursor on the failing line.
    page.click(f"{WIDGET} .jp-Det-nbGoToCell")
    page.wait_for_function(f"() => ({CURSOR})()[1] === 'edit'")
    assert page.evaluate(CURSOR) == [1, "edit", 1, 0]

    # The log tail and the Logs tab: one traceback, in the notebook's cells (not the script's).
    page.click(f"{WIDGET} .jp-Det-nbShowLogs")
    logs = page.wait_for_selector(f"{WIDGET} .jp-Det-logLines:has-text('ZeroDivisionError')")
    text = logs.inner_text()
    assert text.count("Traceback (most recent call last)") == 1, text
    assert re.search(r'Cell In\[2\]"?, line 2', text), text
    assert "_det_notebook_cell.py:" not in text and '_det_notebook_cell.py", line' not in text

    # The sidebar's experiment tab shows the same banner; its Go to cell comes back here.
    page.evaluate(
        f"async () => {{ await window.jupyterapp.commands.execute("
        f"'determined:open-experiment', {{id: {experiment_id}}}); }}"
    )
    tab = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    tab_banner = page.wait_for_selector(f"{tab} .jp-Det-nbBanner-line", timeout=60_000)
    assert re.search(expected, tab_banner.inner_text()), tab_banner.inner_text()
    shoot(page, "experiment-error-banner", f"{tab} .jp-Det-nbBanner")
    set_theme(page, "JupyterLab Dark")
    shoot(page, "experiment-error-banner-dark", f"{tab} .jp-Det-nbBanner")
    colours = page.evaluate(f"""() => {{
        const line = document.querySelector('{tab} .jp-Det-nbBanner-line');
        const text = line.querySelector('.jp-Det-nbBanner-text');
        // As rgb(): a color-mix() background computes to color(srgb ...).
        const rgb = colour => {{
            const context = document.createElement('canvas').getContext('2d');
            context.fillStyle = colour;
            context.fillRect(0, 0, 1, 1);
            const [r, g, b] = context.getImageData(0, 0, 1, 1).data;
            return `rgb(${{r}}, ${{g}}, ${{b}})`;
        }};
        return [rgb(getComputedStyle(text).color), rgb(getComputedStyle(line).backgroundColor)];
    }}""")
    assert _contrast(*colours) >= 4.5, colours  # legible in the dark theme too
    page.click(f"{tab} .jp-Det-nbGoToCell")
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.context?.path === 'fails.ipynb'"
    )
    page.wait_for_function(f"() => ({CURSOR})()[1] === 'edit'")
    assert page.evaluate(CURSOR) == [1, "edit", 1, 0]
    shoot(page, "widget-error-dark")
    set_theme(page, "JupyterLab Light")


def _luminance(rgb: str) -> float:
    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", rgb)[:3])

    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def _contrast(foreground: str, background: str) -> float:
    high, low = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_dark_theme_is_legible(page, lab: Lab) -> None:
    lab.write_notebook(
        "dark.ipynb",
        [
            "%load_ext jupyter_determined",
            config_cell("dark", 10),
            "%%det_submit config --wait\n" + PAUSABLE,
        ],
    )
    lab.open_notebook(page, "dark.ipynb")
    page.evaluate(
        "async () => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Dark'}); }"
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    run_all(page)
    wait_for_widget(page, lab)
    page.wait_for_selector(
        f"{WIDGET} .jp-Det-nbStatus:has-text('Finished (COMPLETED)')", timeout=120_000
    )
    colours = page.evaluate(f"""() => {{
        const widget = document.querySelector('{WIDGET}');
        const style = node => getComputedStyle(node);
        const texts = [...widget.querySelectorAll('.jp-Det-expName, .jp-Det-expHeader-meta span,'
                                                + ' th, td, .jp-Det-nbStatus-text, .jp-Det-tab')];
        return {{background: style(widget).backgroundColor,
                 texts: texts.filter(n => n.offsetParent).map(n => [n.textContent, style(n).color])}};
    }}""")
    assert colours["texts"]
    for text, colour in colours["texts"]:
        assert _contrast(colour, colours["background"]) >= 3.0, (text, colour, colours)
    shoot(page, "widget-dark")
    page.evaluate(
        "async () => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Light'}); }"
    )


SHIPPED = sorted(path.name for path in (REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_notebook_runs_with_its_widget(page, lab: Lab, name: str) -> None:
    shutil.copy(REPO / "notebooks" / name, lab.notebook_dir / name)
    lab.open_notebook(page, name)
    run_all(page)
    experiment_id = wait_for_widget(page, lab, timeout=300)
    # Every cell first: a notebook may finish its experiment and go on with it (the core_v2
    # notebook closes its run, then resumes it), so "Finished" alone is not the end.
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=480_000)
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus:has-text('Finished')", timeout=480_000)
    answer = experiment(lab, experiment_id)
    assert answer["experiment"]["state"] == "COMPLETED", answer
    assert header_state(page) == "COMPLETED"
