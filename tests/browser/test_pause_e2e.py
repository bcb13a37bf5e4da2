"""Pause and server shutdown on a quickstart-style loop (issue 28 item 1), in a real JupyterLab
driven through Chromium.

The loop never checks `should_preempt()` nor saves a checkpoint, as people write it. Pause must
not claim PAUSED while the trial still trains: the widget reads PAUSING with its reason
(user pause) until the run has really exited, then PAUSED. A server shutdown shows the trials
stopping because the master stops, and then at most one "master stopping" note, never a stack
of red error boxes. Screenshots (light and dark) go to docs/images/.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests._support.browser import show_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

REPO = Path(__file__).resolve().parents[2]
DOC_IMAGES = REPO / "docs" / "images"
WIDGET = ".jp-Det-notebookWidget"
SIDEBAR_ROW = "#jupyter-determined-sidebar tr.jp-Det-expRow"
NEVER_CHECKS = """\
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
            op.report_progress(steps)
        core_context.train.report_validation_metrics(steps_completed=steps,
                                                     metrics={"loss": 1.0 / steps})
        op.report_completed(1.0 / steps)
"""
NOTE = "does not check core_context.preempt.should_preempt()"


def _submit(page: Any, lab: Lab, name: str) -> int:
    config = (
        f"config = {{'name': {name!r}, 'max_restarts': 0, 'searcher': {{'name': 'single', "
        "'metric': 'loss', 'smaller_is_better': True, 'max_length': 100000}}"
    )
    lab.write_notebook(
        f"{name}.ipynb",
        ["%load_ext jupyter_determined", config, "%%det_submit config\n" + NEVER_CHECKS],
    )
    lab.open_notebook(page, f"{name}.ipynb")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_selector(WIDGET, timeout=240_000)
    experiment_id = int(page.get_attribute(WIDGET, "data-experiment-id"))
    lab.wait_for(
        "the trial to report",
        lambda: any(
            t["steps_completed"] > 0
            for t in lab.api("GET", f"experiments/{experiment_id}")["trials"]
        ),
        timeout=120,
    )
    page.wait_for_selector(f"{WIDGET} .jp-Det-nbStatus[data-connection='live']")
    return experiment_id


def _shoot_light_and_dark(page: Any, name: str) -> None:
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    widget = page.locator(WIDGET).first
    widget.scroll_into_view_if_needed()
    widget.screenshot(path=str(DOC_IMAGES / f"{name}.png"))
    page.evaluate(
        "async () => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Dark'}); }"
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    # A theme change shows JupyterLab's splash over the page until the theme is loaded.
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=30_000)
    widget.screenshot(path=str(DOC_IMAGES / f"{name}-dark.png"))
    page.evaluate(
        "async () => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Light'}); }"
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=30_000)


def _header_state(page: Any) -> str:
    return page.inner_text(f"{WIDGET} .jp-Det-expHeader .jp-Det-state")


def test_pause_shows_pausing_with_its_reason_until_the_trial_stops(page, lab: Lab) -> None:
    experiment_id = _submit(page, lab, "pause-never-checks")
    page.click(f"{WIDGET} .jp-Det-action-pause")
    # The master reads PAUSED at once, but the trial still trains: the widget says so.
    page.wait_for_function(
        f"() => document.querySelector('{WIDGET} .jp-Det-expHeader .jp-Det-state')"
        ".innerText === 'PAUSING'",
        timeout=15_000,
    )
    # The note names the reason once the trial's update is in (the experiment's may be first).
    page.wait_for_selector(
        f"{WIDGET} .jp-Det-stoppingNote:has-text('1 trial still stopping')", timeout=15_000
    )
    note = page.inner_text(f"{WIDGET} .jp-Det-stoppingNote")
    assert "Pausing… (user pause)" in note and "1 trial still stopping" in note
    assert page.inner_text(f"{WIDGET} tbody tr .jp-Det-state") == "PAUSING"
    # Neither Pause nor Activate can do what it says while the trial drains.
    assert page.is_disabled(f"{WIDGET} .jp-Det-action-pause")
    assert page.is_disabled(f"{WIDGET} .jp-Det-action-activate")
    # The sidebar's table row says PAUSING too (from the master's run_state: STOPPING), and
    # its bulk bar offers no Activate for it.
    show_sidebar(page)
    row = f"{SIDEBAR_ROW}[data-experiment-id='{experiment_id}']"
    page.wait_for_selector(f"{row}[data-state='PAUSING']", timeout=15_000)
    assert page.inner_text(f"{row} .jp-Det-col-state .jp-Det-state") == "PAUSING"
    page.check(f"{row} .jp-Det-rowSelect")
    assert page.is_disabled("#jupyter-determined-sidebar .jp-Det-bulk-activate")
    page.uncheck(f"{row} .jp-Det-rowSelect")
    _shoot_light_and_dark(page, "widget-pausing")

    # The loop is terminated after the grace (30 s): then, and only then, PAUSED.
    page.wait_for_function(
        f"() => document.querySelector('{WIDGET} .jp-Det-expHeader .jp-Det-state')"
        ".innerText === 'PAUSED'",
        timeout=90_000,
    )
    assert page.locator(f"{WIDGET} .jp-Det-stoppingNote").count() == 0
    # Stopped: Activate is offered again, and the sidebar's row reads PAUSED (an experiment
    # event when the run exited, not a poll).
    assert not page.is_disabled(f"{WIDGET} .jp-Det-action-activate")
    page.wait_for_selector(
        f"{SIDEBAR_ROW}[data-experiment-id='{experiment_id}'][data-state='PAUSED']",
        timeout=15_000,
    )
    [trial] = lab.api("GET", f"experiments/{experiment_id}")["trials"]
    assert trial["run_state"] is None and trial["state"] == "PAUSED"
    logs = lab.api("GET", f"trials/{trial['id']}/logs")["logs"]
    notes = [entry["line"] for entry in logs if NOTE in entry["line"]]
    assert len(notes) == 1 and "(user pause)" in notes[0], notes
    lab.api("POST", f"experiments/{experiment_id}/kill")


def test_server_shutdown_shows_master_stopping_once_and_no_error_boxes(page, lab: Lab) -> None:
    _submit(page, lab, "shutdown-never-checks")
    stopper = threading.Thread(target=lab.stop, daemon=True)
    stopper.start()
    try:
        # While the master stops, its trials are asked to stop once, and say why.
        page.wait_for_selector(
            f"{WIDGET} .jp-Det-stoppingNote:has-text('master stopping')", timeout=30_000
        )
        _shoot_light_and_dark(page, "widget-master-stopping")
        stopper.join(120)
        assert not stopper.is_alive(), "the server did not stop"
        page.wait_for_selector(
            f"{WIDGET} .jp-Det-nbStatus[data-connection='disconnected']", timeout=60_000
        )
        # One status line says what happened; no red box per failed request.
        assert page.locator(f"{WIDGET} .jp-Det-error").count() == 0
        assert page.locator(f"{WIDGET} .jp-Det-masterStopping").count() <= 1
        assert "500" not in page.inner_text(WIDGET)
    finally:
        stopper.join(120)
        lab.restart()
