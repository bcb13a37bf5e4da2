"""TensorBoard from the experiment view, in a real JupyterLab (Chromium): the view's TensorBoard
button starts one on the experiment's trials and opens it in a JupyterLab tab, served through the
Jupyter server; its scalars dashboard shows the trial's stored metrics. Screenshots (light and
dark theme) go to test-output/screenshots/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests._support import context_tarball
from tests._support.browser import set_theme, show_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

TRAIN = """\
import determined as det

with det.core.init() as core_context:
    for step in range(1, 6):
        core_context.train.report_training_metrics(steps_completed=step,
                                                   metrics={"loss": 1.0 / step})
    core_context.train.report_validation_metrics(steps_completed=5, metrics={"accuracy": 0.9})
"""
CONFIG = {
    "name": "tensorboard-e2e",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "accuracy", "max_length": 5},
}


def test_the_tensorboard_button_opens_the_experiments_metrics_in_a_tab(
    page, lab: Lab, screenshot, extension_page_errors
) -> None:
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": CONFIG, "context": context_tarball({"train.py": TRAIN})},
    )["experiment"]["id"]
    lab.wait_for(
        "the experiment to complete",
        lambda: (
            lab.api("GET", f"experiments/{experiment_id}")["experiment"]["state"] == "COMPLETED"
        ),
        timeout=180,
    )

    lab.open_in(page)
    show_sidebar(page)
    row = f'.jp-Det-expRow[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(row)
    page.click(row)
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(f"{view} .jp-Det-openTensorBoard")
    screenshot(page, "tensorboard-button")
    page.click(f"{view} .jp-Det-openTensorBoard")

    tab = page.wait_for_selector(".jp-Det-tensorboard iframe", timeout=180_000)
    [board] = lab.api("GET", "tensorboards")["tensorboards"]
    assert board["experimentIds"] == [experiment_id]
    assert board["state"] == "STATE_RUNNING"
    # The iframe loads TensorBoard through the Jupyter server, not from its loopback port.
    src = tab.get_attribute("src")
    assert src.endswith(f"/determined/tensorboard/{board['id']}/"), src
    assert f":{board['port']}" not in src

    frame = page.frame_locator(".jp-Det-tensorboard iframe")
    # The scalars dashboard: one card per tag, grouped by the part before the slash.
    frame.locator("text=training/loss").first.wait_for(timeout=120_000)
    frame.locator("text=validation/accuracy").first.wait_for(timeout=30_000)
    run = f"experiment_{experiment_id}/trial_"
    frame.locator(f"text={run}").first.wait_for(timeout=30_000)
    # The card's data table shows the last training point (step 5, loss 1/5).
    card = frame.locator("scalar-card:has-text('training/loss')").first
    card.get_by_text("0.2", exact=True).first.wait_for(timeout=30_000)
    # Dark first: TensorBoard draws its lines a moment after the data table.
    set_theme(page, "JupyterLab Dark")
    frame.locator("text=training/loss").first.wait_for()
    screenshot(page, "tensorboard-tab-dark")
    set_theme(page, "JupyterLab Light")
    screenshot(page, "tensorboard-tab-light")

    # A second click shows the same tab and the same TensorBoard (no second process).
    page.click(f"#jp-main-dock-panel .lm-TabBar-tab:has-text('{experiment_id}: tensorboard-e2e')")
    page.wait_for_selector(view, state="visible")
    page.click(f"{view} .jp-Det-openTensorBoard")
    page.wait_for_selector(".jp-Det-tensorboard iframe", state="visible")
    tabs = page.locator("#jp-main-dock-panel .lm-TabBar-tab:has-text('TensorBoard: experiment')")
    assert tabs.count() == 1
    assert [b["id"] for b in lab.api("GET", "tensorboards")["tensorboards"]] == [board["id"]]
    assert extension_page_errors() == []
    lab.api("POST", f"tensorboards/{board['id']}/kill", json={})
