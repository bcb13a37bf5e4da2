"""The JupyterLab sidebar end to end: a real `jupyter lab` with jupyter_determined, Chromium.

What a user does: open the Determined panel, submit an experiment from a notebook (with
`%%det_submit` and with the toolbar button), watch it appear and progress without reloading,
open its view, see its learning curve hold the reported points, pause it, read its logs.
Screenshots of each step are saved under test-output/screenshots/ for review.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

from tests._support.browser import show_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

# The experiment name carries markup: the list and the view must show it as text.
HOSTILE_NAME = '<img src=x onerror="window.__detInjected=1">e2e'

TRAINING_CODE = """\
import logging
import time

import determined as det

logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
info = det.get_cluster_info()
with det.core.init() as core_context:
    start = 0
    if info is not None and info.latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            start = int((path / "step").read_text())
    for step in range(start + 1, STEPS + 1):
        time.sleep(SLEEP)
        loss = 1.0 / step
        logging.info(f"step {step} loss {loss:.4f}")
        core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
        core_context.train.report_progress(step / STEPS)
        if step % 5 == 0:
            core_context.train.report_validation_metrics(steps_completed=step,
                                                         metrics={"loss": loss})
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "step").write_text(str(step))
            if core_context.preempt.should_preempt():
                break
"""

CONFIG = f"""\
name: '{HOSTILE_NAME}'
searcher:
  name: single
  metric: loss
  smaller_is_better: true
  max_length: 1
hyperparameters:
  lr: 0.01
max_restarts: 0
"""


def training_code(steps: int, sleep: float) -> str:
    return f"STEPS = {steps}\nSLEEP = {sleep}\n" + TRAINING_CODE


def show_sidebar_list(page) -> None:
    show_sidebar(page)
    page.wait_for_selector("#jupyter-determined-sidebar .jp-Det-listStatus")


def run_command(page, command: str, args: dict | None = None) -> None:
    """Start a JupyterLab command (not awaiting it: run-all resolves when the cells finish)."""
    page.evaluate(
        "([c, a]) => { window.jupyterapp.commands.execute(c, a); }", [command, args or {}]
    )


def new_experiment_ids(lab: Lab, known: set[int]) -> list[int]:
    return [e["id"] for e in lab.api("GET", "experiments")["experiments"] if e["id"] not in known]


def test_extension_is_installed_and_enabled(lab: Lab) -> None:
    # The server's environment: the extension is found on JUPYTER_PATH, as after pip install.
    listing = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        env=_server_env(lab),
        timeout=60,
    )
    text = listing.stdout + listing.stderr
    line = next((entry for entry in text.splitlines() if "jupyter-determined" in entry), "")
    assert "enabled" in line and "OK" in line, text


def _server_env(lab: Lab) -> dict:
    import os

    env = dict(os.environ)
    data_dir = lab.notebook_dir.parent / "jupyter-data"
    env["JUPYTER_PATH"] = str(data_dir)
    return env


def test_api_errors_are_readable(page, lab: Lab, screenshot, extension_page_errors) -> None:
    lab.open_in(page)
    show_sidebar_list(page)
    run_command(page, "determined:open-experiment", {"id": 987654})
    error = page.wait_for_selector(".jp-Det-experimentView .jp-Det-error")
    assert "experiment 987654 not found" in error.inner_text()
    screenshot(page, "01-error-for-missing-experiment")
    assert not extension_page_errors()


def test_cell_magic_submission_live_progress_chart_pause_and_logs(
    page, lab: Lab, screenshot, extension_page_errors
) -> None:
    (lab.notebook_dir / "config.yaml").write_text(CONFIG)
    lab.write_notebook(
        "magic.ipynb",
        [
            "%load_ext jupyter_determined",
            "%%det_submit config.yaml\n" + training_code(steps=200, sleep=0.25),
        ],
    )
    known = {e["id"] for e in lab.api("GET", "experiments")["experiments"]}

    lab.open_notebook(page, "magic.ipynb")
    show_sidebar_list(page)
    run_command(page, "notebook:run-all-cells")

    experiment_id = lab.wait_for(
        "the experiment created by %%det_submit", lambda: new_experiment_ids(lab, known), timeout=90
    )[0]
    # It appears in the list by itself (live events, no reload), its name inert.
    row = f'.jp-Det-expRow[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(row)
    assert page.inner_text(f"{row} .jp-Det-expName") == HOSTILE_NAME
    assert page.evaluate("() => window.__detInjected") is None
    assert page.query_selector(f"{row} img") is None
    # ... and progresses.
    page.wait_for_function(
        """id => {
            const bar = document.querySelector(`.jp-Det-expRow[data-experiment-id="${id}"] [role=progressbar]`);
            return bar && Number(bar.getAttribute('aria-valuenow')) > 0;
        }""",
        arg=experiment_id,
        timeout=90_000,
    )
    screenshot(page, "02-sidebar-experiment-running")
    # The live widget renders under the submitting cell (the labextension's renderer), with
    # its state and the action buttons, the hostile name inert there too.
    widget = f'.jp-OutputArea-output.jp-Det-notebookWidget[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(f"{widget} .jp-Det-action-pause:not([disabled])", timeout=90_000)
    assert page.inner_text(f"{widget} .jp-Det-expTitle") == HOSTILE_NAME
    assert page.evaluate("() => window.__detInjected") is None
    screenshot(page, "02b-notebook-live-widget")

    page.click(row)
    # The tab's view (the notebook's widget embeds one too).
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(f'{view} .jp-Det-expHeader [data-state="ACTIVE"]', timeout=90_000)
    assert page.inner_text(f"{view} .jp-Det-expTitle") == HOSTILE_NAME
    page.wait_for_selector(f"{view} .jp-Det-trialsTable tr[data-trial-id]")
    screenshot(page, "03-experiment-view-trials")

    # Learning curves: wait for some points, then pause and compare with what was reported.
    page.click(f'{view} .jp-Det-tab[data-section="curves"]')
    training_chart = f'{view} .jp-Det-chart[data-group="training"]'
    page.wait_for_function(
        "sel => Number(document.querySelector(sel)?.getAttribute('data-points')) >= 6",
        arg=training_chart,
        timeout=90_000,
    )
    assert page.query_selector(f"{training_chart} canvas") is not None

    page.click(f"{view} .jp-Det-action-pause")  # Pause acts at once (Activate undoes it)
    page.wait_for_selector(f'{view} .jp-Det-expHeader [data-state="PAUSED"]', timeout=30_000)
    page.wait_for_selector(
        f'.jp-Det-expRow[data-experiment-id="{experiment_id}"][data-state="PAUSED"]'
    )
    trial_id = lab.api("GET", f"experiments/{experiment_id}")["trials"][0]["id"]
    lab.wait_for(
        "the trial to stop after the pause",
        lambda: (
            lab.api("GET", f"trials/{trial_id}")["trial"]["state"]
            in {"PAUSED", "COMPLETED", "CANCELED"}
        ),
        timeout=90,
    )
    reported = lab.api("GET", f"trials/{trial_id}/metrics", params={"group": "training"})["metrics"]
    assert len(reported) >= 6
    page.wait_for_function(
        "([sel, n]) => Number(document.querySelector(sel)?.getAttribute('data-points')) === n",
        arg=[training_chart, len(reported)],
        timeout=30_000,
    )
    screenshot(page, "04-learning-curves-paused")

    page.click(f'{view} .jp-Det-tab[data-section="logs"]')
    page.wait_for_function(
        """sel => [...document.querySelectorAll(sel + ' .jp-Det-logLine')]
                    .some(n => /step 3 loss/.test(n.textContent))""",
        arg=view,
        timeout=30_000,
    )
    page.select_option(f"{view} .jp-Det-logLevel", "ERROR")
    assert not page.query_selector_all(f"{view} .jp-Det-logLine.jp-Det-log-info")
    page.select_option(f"{view} .jp-Det-logLevel", "DEBUG")
    screenshot(page, "05-logs")

    page.click(f'{view} .jp-Det-tab[data-section="checkpoints"]')
    checkpoint_row = page.wait_for_selector(f"{view} .jp-Det-checkpointsTable tr[data-uuid]")
    uuid = checkpoint_row.get_attribute("data-uuid")
    assert uuid in {
        c["uuid"] for c in lab.api("GET", f"experiments/{experiment_id}/checkpoints")["checkpoints"]
    }

    # Kill it so it does not hold a slot for the next test.
    page.click(f"{view} .jp-Det-action-kill")
    page.click(".jp-Dialog-button.jp-mod-accept")
    page.wait_for_selector(f'{view} .jp-Det-expHeader [data-state="CANCELED"]', timeout=60_000)
    assert not extension_page_errors()


def test_toolbar_button_submits_the_notebook(page, lab: Lab, screenshot) -> None:
    (lab.notebook_dir / "toolbar.yaml").write_text(CONFIG.replace(HOSTILE_NAME, "from-toolbar"))
    lab.write_notebook("toolbar.ipynb", [training_code(steps=8, sleep=0.1)])
    known = {e["id"] for e in lab.api("GET", "experiments")["experiments"]}

    lab.open_notebook(page, "toolbar.ipynb")
    show_sidebar_list(page)
    page.click(".jp-Det-submitButton")
    page.wait_for_selector(".jp-Det-submitDialog")
    # The picker lists the folder's YAML files (config.yaml of the test above is there too).
    options = page.eval_on_selector_all(".jp-Det-configPicker option", "os => os.map(o => o.value)")
    assert "toolbar.yaml" in options
    page.select_option(".jp-Det-configPicker", "toolbar.yaml")
    page.wait_for_function(
        "() => document.querySelector('.jp-Det-configText')?.value.includes('from-toolbar')"
    )
    screenshot(page, "06-submit-dialog")
    page.click(".jp-Dialog-button.jp-mod-accept")

    output = page.wait_for_selector(".jp-Det-submitOutput[data-ok]", timeout=90_000)
    text = output.inner_text()
    assert output.get_attribute("data-ok") == "true", text
    experiment_id = int(re.search(r"Created experiment (\d+)", text).group(1))
    assert experiment_id in new_experiment_ids(lab, known)
    screenshot(page, "07-submit-result")
    page.click(".jp-Det-openCreated")
    page.click(".jp-Dialog-button.jp-mod-accept")
    # The tab's view (the notebook's widget embeds one too).
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(f'{view} .jp-Det-expHeader [data-state="COMPLETED"]', timeout=120_000)
    page.wait_for_selector(
        f'.jp-Det-expRow[data-experiment-id="{experiment_id}"][data-state="COMPLETED"]'
    )
    experiment = lab.api("GET", f"experiments/{experiment_id}")
    assert experiment["experiment"]["name"] == "from-toolbar"
    assert experiment["experiment"]["notebook"]["path"].endswith("toolbar.ipynb")
    page.click(f'{view} .jp-Det-tab[data-section="curves"]')
    page.wait_for_function(
        "sel => Number(document.querySelector(sel)?.getAttribute('data-points')) === 8",
        arg=f'{view} .jp-Det-chart[data-group="training"]',
        timeout=30_000,
    )
    page.click(f'{view} .jp-Det-tab[data-section="hparams"]')
    page.wait_for_selector(f"{view} .jp-Det-section-hparams canvas")
    screenshot(page, "08-toolbar-experiment-completed")


def test_state_filter_and_name_filter(page, lab: Lab, screenshot) -> None:
    # Its own experiments, in states nothing else changes: one stays PAUSED (created paused),
    # the other is activated and runs to COMPLETED.
    tag = f"filter-{os.urandom(3).hex()}"

    def create(name: str) -> int:
        return lab.api(
            "POST",
            "experiments",
            json={
                "config": {
                    "name": name,
                    "entrypoint": "python3 -c pass",
                    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
                },
                "context": None,
                "activate": False,
            },
        )["experiment"]["id"]

    paused_id, completed_id = create(f"{tag}-paused"), create(f"{tag}-done")
    lab.api("POST", f"experiments/{completed_id}/activate")
    lab.wait_for(
        "the activated experiment to complete",
        lambda: lab.api("GET", f"experiments/{completed_id}")["experiment"]["state"] == "COMPLETED",
        timeout=90,
    )

    lab.open_in(page)
    show_sidebar_list(page)
    page.wait_for_selector(f'.jp-Det-expRow[data-experiment-id="{completed_id}"]')
    page.fill(".jp-Det-nameFilter", tag)
    for state, expected in (("PAUSED", paused_id), ("COMPLETED", completed_id)):
        page.select_option(".jp-Det-stateFilter", state)
        page.wait_for_function(
            """id => { const rows = [...document.querySelectorAll('.jp-Det-expRow')];
                       return rows.length === 1 && rows[0].dataset.experimentId === String(id); }""",
            arg=expected,
            timeout=30_000,
        )
        assert page.inner_text(".jp-Det-expRow .jp-Det-expName").startswith(tag)
    screenshot(page, "09-filtered-list-and-cluster")


def test_falls_back_to_polling_when_the_event_stream_fails(page, lab: Lab, screenshot) -> None:
    # A proxy that refuses the stream: the panel must say so and keep the list current.
    page.route(
        re.compile(r".*/determined/api/v1/events.*"),
        lambda route: route.fulfill(status=502, body="bad gateway"),
    )
    lab.open_in(page)
    show_sidebar_list(page)
    page.wait_for_selector('.jp-Det-feed[data-mode="polling"]', timeout=30_000)
    created = lab.api(
        "POST",
        "experiments",
        json={
            "config": {
                "name": "created-while-polling",
                "entrypoint": "python3 -c pass",
                "searcher": {"name": "single", "metric": "loss", "max_length": 1},
            },
            "context": None,
            "activate": False,
        },
    )["experiment"]
    page.wait_for_selector(f'.jp-Det-expRow[data-experiment-id="{created["id"]}"]', timeout=30_000)
    assert (
        page.inner_text(f'.jp-Det-expRow[data-experiment-id="{created["id"]}"] .jp-Det-expName')
        == "created-while-polling"
    )
    screenshot(page, "10-polling-fallback")
