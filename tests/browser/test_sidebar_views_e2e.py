"""The experiment view's charts in a real JupyterLab (Chromium): what a search looks like.

A random search of 4 trials, each reporting ONE validation (as ASHA's first rung does) and a few
training points, over a log-scale learning rate: every single-point series must be visible; the
hyperparameter view must put the learning rate on a log axis; the comparison must show the
picked trials side by side. The screenshots go to docs/images/ (docs/jupyter.md shows them).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests._support import context_tarball
from tests._support.browser import show_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"

ONE_VALIDATION = """\
import determined as det

info = det.get_cluster_info()
lr = info.trial.hparams["lr"]
with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        for step in range(1, 4):
            core_context.train.report_training_metrics(steps_completed=step,
                                                       metrics={"loss": lr * 1000 / step})
        core_context.train.report_validation_metrics(steps_completed=3,
                                                     metrics={"val_loss": lr * 100})
        op.report_completed(lr * 100)
"""
CONFIG = {
    "name": "one-point-search",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "hyperparameters": {
        "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
        "layers": {"type": "int", "minval": 1, "maxval": 4},
    },
    "searcher": {
        "name": "random",
        "metric": "val_loss",
        "smaller_is_better": True,
        "max_trials": 4,
        "max_length": 3,
    },
}


def _shoot(page: Any, name: str, selector: str) -> None:
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    page.locator(selector).first.screenshot(path=str(DOC_IMAGES / f"{name}.png"))


def _coloured_pixels(page: Any, canvas: str) -> int:
    """Pixels of a chart's canvas that are saturated colour (series), not grey (axes, grid)."""
    return page.evaluate(
        """sel => {
        const canvas = document.querySelector(sel);
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let count = 0;
        for (let i = 0; i < data.length; i += 4) {
            const [r, g, b, a] = [data[i], data[i + 1], data[i + 2], data[i + 3]];
            if (a > 128 && Math.max(r, g, b) - Math.min(r, g, b) > 60) count += 1;
        }
        return count;
    }""",
        canvas,
    )


def test_a_search_of_single_point_series_log_axes_and_comparison(page, lab: Lab) -> None:
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": CONFIG, "context": context_tarball({"train.py": ONE_VALIDATION})},
    )["experiment"]["id"]
    lab.wait_for(
        "the search to complete",
        lambda: (
            lab.api("GET", f"experiments/{experiment_id}")["experiment"]["state"] == "COMPLETED"
        ),
        timeout=180,
    )
    trials = lab.api("GET", f"experiments/{experiment_id}")["trials"]
    assert len(trials) == 4

    lab.open_in(page)
    show_sidebar(page)
    row = f'.jp-Det-expRow[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(row)
    _shoot(page, "sidebar-list", "#jupyter-determined-sidebar")
    page.click(row)
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(f"{view} .jp-Det-trialsTable tr[data-trial-id]")
    _shoot(page, "sidebar-trials", view)
    # Clicking it again brings its tab forward: one tab per experiment, however many clicks.
    for _ in range(3):
        page.click(row)
    tabs = page.locator("#jp-main-dock-panel .lm-TabBar-tab:has-text('one-point-search')")
    assert tabs.count() == 1
    assert page.locator(view).count() == 1

    # Every trial's one validation point is plotted (4 points, 4 series) and visible.
    page.click(f'{view} .jp-Det-tab[data-section="curves"]')
    validation = f'{view} .jp-Det-chart[data-group="validation"]'
    page.wait_for_selector(f'{validation}[data-points="4"]', timeout=30_000)
    assert len(page.get_attribute(validation, "data-series").split(",")) == 4
    _shoot(page, "sidebar-curves", view)
    # Only the best trial plotted: its single point alone must put colour on the canvas.
    page.click(f'{view} .jp-Det-tab[data-section="trials"]')
    page.click(f"{view} .jp-Det-trialsToolbar button:has-text('None')")
    # The table is redrawn on the next animation frame: until then its boxes are the old ones,
    # still ticked, and `check` would find the best trial's ticked and do nothing.
    page.wait_for_selector(
        f"{view} .jp-Det-trialsTable input[type=checkbox]:checked", state="detached"
    )
    best = min(trials, key=lambda t: t["best_validation"]["metrics"]["val_loss"])
    page.check(f'{view} .jp-Det-trialsTable tr[data-trial-id="{best["id"]}"] input[type=checkbox]')
    page.click(f'{view} .jp-Det-tab[data-section="curves"]')
    page.wait_for_selector(f'{validation}[data-points="1"] canvas')
    assert _coloured_pixels(page, f"{validation} canvas") > 10

    # The learning rate was sampled on a log scale: its axis is logarithmic.
    page.click(f'{view} .jp-Det-tab[data-section="hparams"]')
    parcoords = page.wait_for_selector(f"{view} .jp-Det-parcoords[data-lines='4']")
    axes = dict(axis.split(":") for axis in parcoords.get_attribute("data-axes").split(","))
    assert axes["lr"] == "log", axes
    # Its scatter against the metric: a log x axis whose every tick has a number for a label
    # (uPlot's own log filter once turned the 2s and 5s into "null").
    page.select_option(f"{view} .jp-Det-hparamSelect", "lr")
    scatter = f"{view} .jp-Det-chart-scatter[data-x-ticks]"
    page.wait_for_selector(scatter)
    ticks = page.get_attribute(scatter, "data-x-ticks").split("|")
    assert len(ticks) >= 2 and "null" not in ticks and all(ticks), ticks
    assert all(float(tick) > 0 for tick in ticks), ticks
    _shoot(page, "sidebar-hparams", view)

    # Two trials side by side.
    page.click(f'{view} .jp-Det-tab[data-section="trials"]')
    page.click(f"{view} .jp-Det-trialsToolbar button:has-text('All')")
    page.click(f'{view} .jp-Det-tab[data-section="compare"]')
    compare = page.wait_for_selector(f"{view} .jp-Det-compare table")
    text = compare.inner_text()
    assert all(str(trial["id"]) in text for trial in trials) and "lr" in text
    _shoot(page, "sidebar-compare", view)

    page.evaluate(
        "async () => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Dark'}); }"
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    page.click(f'{view} .jp-Det-tab[data-section="curves"]')
    page.wait_for_selector(f"{validation} canvas")
    _shoot(page, "sidebar-curves-dark", view)
    page.evaluate(
        "async () => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Light'}); }"
    )
