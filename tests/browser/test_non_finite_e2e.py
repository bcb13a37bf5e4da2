"""A diverging run in JupyterLab (Chromium), issue 26 row 3: a core_v2 run in the notebook's
kernel reports NaN and Infinity losses. The sidebar still lists every experiment (its
`JSON.parse` of the list never fails), and the learning curve breaks at each non-finite point
and marks it (`data-nonfinite`) instead of failing. Screenshot: non-finite-curves.png."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests._support.browser import show_sidebar

if TYPE_CHECKING:
    from tests._support.browser import Lab


DIVERGE = """\
from determined.experimental import core_v2
core_v2.init(config=core_v2.Config(
    name="diverging-in-this-kernel", searcher={"metric": "loss"},
    external_experiment_id="diverging-exp", external_trial_id="diverging-trial"))
losses = [1.0, float("nan"), 0.5, float("inf"), 0.25]
for step, loss in enumerate(losses, start=1):
    core_v2.train.report_training_metrics(step, {"loss": loss})
    core_v2.train.report_validation_metrics(step, {"loss": loss})
core_v2.close()
print("diverged and closed")
"""


def test_a_diverging_run_is_listed_and_its_curve_has_marked_gaps(
    page, lab: Lab, screenshot, extension_page_errors
) -> None:
    lab.write_notebook("diverging.ipynb", [DIVERGE])
    known = {e["id"] for e in lab.api("GET", "experiments")["experiments"]}
    lab.open_notebook(page, "diverging.ipynb")
    show_sidebar(page)
    page.wait_for_selector("#jupyter-determined-sidebar .jp-Det-listStatus")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    experiment = lab.wait_for(
        "the diverging run's experiment",
        lambda: [
            e
            for e in lab.api("GET", "experiments")["experiments"]
            if e["id"] not in known and e["state"] == "COMPLETED"
        ],
        timeout=120,
    )[0]
    # The best skips NaN and Infinity.
    assert experiment["best_validation"] == 0.25
    row = f'.jp-Det-expRow[data-experiment-id="{experiment["id"]}"]'
    page.wait_for_selector(f'{row}[data-state="COMPLETED"]', timeout=60_000)
    assert "Cannot load experiments" not in page.inner_text("#jupyter-determined-sidebar")

    page.click(row)
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment["id"]}"]'
    page.click(f'{view} .jp-Det-tab[data-section="curves"]')
    training = f'{view} .jp-Det-chart[data-group="training"]'
    # Three finite points drawn, two non-finite ones marked.
    page.wait_for_selector(f'{training}[data-points="3"][data-nonfinite="2"] canvas')
    screenshot(page, "non-finite-curves")
    assert extension_page_errors() == []
