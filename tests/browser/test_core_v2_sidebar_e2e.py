"""A core_v2 run training in the notebook's own kernel, seen in JupyterLab (Chromium): it appears
in the sidebar live, marked with the "kernel" badge, its metrics arrive, and closing it in the
kernel turns it COMPLETED. Screenshots in the light and the dark theme go to
test-output/screenshots/ (core-v2-sidebar-light.png, core-v2-sidebar-dark.png)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests._support.browser import set_theme, show_sidebar

if TYPE_CHECKING:
    from tests._support.browser import Lab


OPEN_AND_TRAIN = """\
from determined.experimental import core_v2
core_v2.init(config=core_v2.Config(
    name="trains-in-this-kernel", hparams={"lr": 0.1}, searcher={"metric": "loss"},
    external_experiment_id="browser-exp", external_trial_id="browser-trial"))
for step in range(1, 6):
    core_v2.train.report_training_metrics(step, {"loss": 1 / step})
print("reported", core_v2.info.trial.trial_id)
"""

# Waits for the test's go-ahead (a file it creates), then ends the run.
CLOSE_WHEN_TOLD = """\
import os, time
while not os.path.exists("close-now"):
    time.sleep(0.1)
core_v2.close()
print("closed")
"""


def test_a_core_v2_run_in_the_kernel_shows_live_in_the_sidebar_with_its_kernel_badge(
    page, lab: Lab, screenshot, extension_page_errors
) -> None:
    lab.write_notebook("kernel-run.ipynb", [OPEN_AND_TRAIN, CLOSE_WHEN_TOLD])
    known = {e["id"] for e in lab.api("GET", "experiments")["experiments"]}
    lab.open_notebook(page, "kernel-run.ipynb")
    show_sidebar(page)
    page.wait_for_selector("#jupyter-determined-sidebar .jp-Det-listStatus")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

    experiment = lab.wait_for(
        "the core_v2 run's experiment",
        lambda: [e for e in lab.api("GET", "experiments")["experiments"] if e["id"] not in known],
        timeout=90,
    )[0]
    assert experiment["unmanaged"] is True
    row = f'.jp-Det-expRow[data-experiment-id="{experiment["id"]}"]'
    # Live (no reload): the row appears ACTIVE with the live kernel badge.
    page.wait_for_selector(f'{row}[data-state="ACTIVE"] .jp-Det-kernel[data-kernel="live"]')
    assert page.inner_text(f"{row} .jp-Det-kernel") == "kernel"
    trial_id = lab.api("GET", f"experiments/{experiment['id']}")["trials"][0]["id"]
    lab.wait_for(
        "the five training reports",
        lambda: (
            len(
                lab.api("GET", f"trials/{trial_id}/metrics", params={"group": "training"})[
                    "metrics"
                ]
            )
            == 5
        ),
    )
    screenshot(page, "core-v2-sidebar-light")
    set_theme(page, "JupyterLab Dark")
    page.wait_for_selector(f"{row} .jp-Det-kernel")
    screenshot(page, "core-v2-sidebar-dark")
    set_theme(page, "JupyterLab Light")

    # The experiment's view offers no pause for a run the master does not run.
    page.click(row)
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment["id"]}"]'
    page.wait_for_selector(f"{view} .jp-Det-expHeader .jp-Det-kernel")
    assert page.query_selector(f"{view} .jp-Det-action-pause") is None

    (lab.notebook_dir / "close-now").write_text("")
    page.wait_for_selector(
        f'{row}[data-state="COMPLETED"] .jp-Det-kernel[data-kernel="ended"]', timeout=60_000
    )
    assert lab.api("GET", f"trials/{trial_id}")["trial"]["state"] == "COMPLETED"
    assert extension_page_errors() == []


LOCAL_CELL = """\
%%det_submit --local --name local-in-kernel
import determined as det
with det.core.init() as core_context:
    for step in range(1, 4):
        core_context.train.report_training_metrics(step, {"loss": 1 / step})
print("local training done")
"""


def test_det_submit_local_shows_its_live_widget_with_the_kernel_badge(
    page, lab: Lab, screenshot, extension_page_errors
) -> None:
    lab.write_notebook("local-run.ipynb", ["%load_ext jupyter_determined", LOCAL_CELL])
    known = {e["id"] for e in lab.api("GET", "experiments")["experiments"]}
    lab.open_notebook(page, "local-run.ipynb")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    experiment = lab.wait_for(
        "the --local run's experiment",
        lambda: [e for e in lab.api("GET", "experiments")["experiments"] if e["id"] not in known],
        timeout=90,
    )[0]
    assert experiment["unmanaged"] is True and experiment["name"] == "local-in-kernel"
    widget = f'.jp-OutputArea-output.jp-Det-notebookWidget[data-experiment-id="{experiment["id"]}"]'
    page.wait_for_selector(f'{widget} .jp-Det-expHeader [data-state="COMPLETED"]', timeout=90_000)
    page.wait_for_selector(f'{widget} .jp-Det-kernel[data-kernel="ended"]')
    page.wait_for_selector(".jp-OutputArea-output:has-text('local training done')")
    trial_id = lab.api("GET", f"experiments/{experiment['id']}")["trials"][0]["id"]
    metrics = lab.api("GET", f"trials/{trial_id}/metrics", params={"group": "training"})
    assert [m["steps_completed"] for m in metrics["metrics"]] == [1, 2, 3]
    screenshot(page, "core-v2-local-widget")
    assert extension_page_errors() == []
