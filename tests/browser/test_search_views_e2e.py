"""The search-analysis views in a real JupyterLab (Chromium), on a finished random search.

What optuna-dashboard, W&B and Determined's WebUI give a search and this extension lacked
(issue 28, item 10): hyperparameter importance, the optimisation history, slice and contour
plots (Hyperparameters tab); the curves' controls (smoothing, log y, x axis in batches, epochs
or wall time, PNG and CSV export); the profiler's system metrics per trial. The widget under a
cell embeds the same experiment view, so this covers it too. Screenshots in the light and the
dark theme go to docs/images/ (docs/sidebar.md and docs/jupyter.md show them).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests._support import context_tarball
from tests._support.browser import set_theme, show_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"

# The metric follows the learning rate alone: importance must rank `lr` first (with 8 trials
# the forest does so in more than 99.9% of random draws of the other two). Training
# reports carry `epochs` (as the PyTorch Trainer's do); the profiler samples /proc.
TRAIN = """\
import math
import time
import determined as det

info = det.get_cluster_info()
hp = info.trial.hparams
with det.core.init() as core_context:
    core_context.profiler.on(sampling_interval=0.1, samples_per_report=2)
    for op in core_context.searcher.operations():
        for step in range(1, 9):
            core_context.train.report_training_metrics(
                steps_completed=step * 10,
                metrics={"loss": hp["lr"] * 1000 / step + (step % 2) * hp["lr"] * 300,
                         "epochs": step // 2},
            )
            time.sleep(0.1)
        value = 5 + math.log10(hp["lr"])
        core_context.train.report_validation_metrics(steps_completed=80,
                                                     metrics={"val_loss": value})
        op.report_completed(value)
    time.sleep(0.5)
"""
CONFIG = {
    "name": "search-views",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "hyperparameters": {
        "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
        "layers": {"type": "int", "minval": 1, "maxval": 8},
        "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5},
    },
    "searcher": {
        "name": "random",
        "metric": "val_loss",
        "smaller_is_better": True,
        "max_trials": 8,
        "max_length": 80,
    },
}


def _shoot(page: Any, name: str, selector: str) -> None:
    """Screenshot one section whole: the page is made tall enough that nothing scrolls."""
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1300, "height": 2300})
    try:
        section = page.locator(selector).first
        section.evaluate("node => node.scrollIntoView()")
        section.screenshot(path=str(DOC_IMAGES / f"{name}.png"))
    finally:
        page.set_viewport_size({"width": 1500, "height": 950})


def _download(page: Any, button: str) -> bytes:
    with page.expect_download() as info:
        page.click(button)
    return Path(info.value.path()).read_bytes()


def _csv(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode())))


def test_search_analysis_curve_controls_and_system_metrics(page, lab: Lab) -> None:
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": CONFIG, "context": context_tarball({"train.py": TRAIN})},
    )["experiment"]["id"]
    lab.wait_for(
        "the search to complete",
        lambda: (
            lab.api("GET", f"experiments/{experiment_id}")["experiment"]["state"] == "COMPLETED"
        ),
        timeout=240,
    )
    trials = lab.api("GET", f"experiments/{experiment_id}")["trials"]
    assert len(trials) == 8

    lab.open_in(page)
    show_sidebar(page)
    row = f'.jp-Det-expRow[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(row)
    page.click(row)
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(f"{view} .jp-Det-trialsTable tr[data-trial-id]")

    # ---- Hyperparameters tab: importance, history, slices, contour ----------------------------
    page.click(f'{view} .jp-Det-tab[data-section="hparams"]')
    importance = f"{view} .jp-Det-importance"
    page.wait_for_selector(f"{importance} .jp-Det-importanceRow")
    bars = page.locator(f"{importance} .jp-Det-importanceRow")
    names = [bars.nth(i).get_attribute("data-hparam") for i in range(bars.count())]
    shares = [float(bars.nth(i).get_attribute("data-importance")) for i in range(bars.count())]
    assert sorted(names) == ["dropout", "layers", "lr"], names
    assert names[0] == "lr", (names, shares)  # the metric is a function of lr alone
    assert abs(sum(shares) - 1) < 1e-6 and shares == sorted(shares, reverse=True), shares

    # Optimisation history: each trial's value and the best so far, in the order trials ended.
    history = f'{view} .jp-Det-chart[data-group="history"]'
    page.wait_for_selector(f'{history}[data-points="16"] canvas')
    assert page.get_attribute(history, "data-series") == "val_loss,best so far"

    # A slice per hyperparameter, each with one point per trial.
    slices = page.locator(f"{view} .jp-Det-slices .jp-Det-chart-scatter")
    assert slices.count() == 3
    assert all(slices.nth(i).get_attribute("data-points") == "8" for i in range(3))

    # Contour of two picked hyperparameters: every trial placed, lr on a log axis.
    contour = f"{view} .jp-Det-contour"
    page.select_option(f"{contour} .jp-Det-contourX", "lr")
    page.select_option(f"{contour} .jp-Det-contourY", "dropout")
    plot = page.wait_for_selector(f'{contour} .jp-Det-contourPlot[data-x="lr"][data-y="dropout"]')
    assert plot.get_attribute("data-points") == "8"
    assert plot.get_attribute("data-x-log") == "true"
    _shoot(page, "search-analysis", f"{view} .jp-Det-searchAnalysis")

    # ---- Learning curves: x axis, log y, smoothing, export -----------------------------------
    page.click(f'{view} .jp-Det-tab[data-section="curves"]')
    training = f'{view} .jp-Det-chart[data-group="training"]'
    page.wait_for_selector(f'{training}[data-points="64"] canvas')
    controls = f"{view} .jp-Det-curveControls"
    axes = page.locator(f"{controls} .jp-Det-xAxisSelect option")
    assert [axes.nth(i).get_attribute("value") for i in range(axes.count())] == [
        "steps",
        "epochs",
        "time",
    ]
    page.select_option(f"{controls} .jp-Det-xAxisSelect", "epochs")
    page.wait_for_selector(f'{training}[data-x-axis="epochs"]')
    ticks = page.get_attribute(training, "data-x-ticks").split("|")
    assert max(float(t) for t in ticks) <= 5, ticks  # epochs 0..4, not batches 10..80
    page.select_option(f"{controls} .jp-Det-xAxisSelect", "time")
    page.wait_for_selector(f'{training}[data-x-axis="time"]')
    page.select_option(f"{controls} .jp-Det-xAxisSelect", "steps")
    page.wait_for_selector(f'{training}[data-x-axis="steps"]')

    page.check(f"{controls} .jp-Det-logY")
    page.wait_for_selector(f'{training}[data-y-log="true"]')

    block = f"{view} .jp-Det-chartBlock:has(.jp-Det-chart[data-group='training'])"
    raw = _csv(_download(page, f"{block} .jp-Det-exportCsv"))
    # Smoothing: the exported (shown) series are the EMA of the raw ones.
    page.evaluate(
        """sel => { const s = document.querySelector(sel); s.value = '0.8';
        s.dispatchEvent(new Event('input', {bubbles: true})); }""",
        f"{controls} .jp-Det-smoothing",
    )
    page.wait_for_selector(f'{training}[data-smoothing="0.8"]')
    smoothed = _csv(_download(page, f"{block} .jp-Det-exportCsv"))
    assert raw[0][0] == "batches" and len(raw[0]) == 9 and len(raw) == 9, raw
    assert smoothed[0] == raw[0]
    first_raw = [float(v) for v in raw[1]]
    first_smoothed = [float(v) for v in smoothed[1]]
    # The first point is its own average; later ones are pulled toward the earlier ones.
    assert all(abs(a - b) <= 1e-9 * abs(a) for a, b in zip(first_raw, first_smoothed, strict=True))
    assert smoothed[2:] != raw[2:]
    png = _download(page, f"{block} .jp-Det-exportPng")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"

    # ---- System metrics of the selected trials (the profiler's cpu and memory groups) ---------
    system = f"{view} .jp-Det-systemCharts"
    cpu = f'{system} .jp-Det-chart[data-group="cpu"]'
    page.wait_for_selector(f"{cpu} canvas")
    assert int(page.get_attribute(cpu, "data-points")) > 0
    assert page.locator(f'{system} .jp-Det-chart[data-group="memory"] canvas').count() == 1
    _shoot(page, "curve-controls-system", f"{view} .jp-Det-section-curves")

    set_theme(page, "JupyterLab Dark")
    page.wait_for_selector(f"{cpu} canvas")
    _shoot(page, "curve-controls-system-dark", f"{view} .jp-Det-section-curves")
    page.click(f'{view} .jp-Det-tab[data-section="hparams"]')
    page.wait_for_selector(f"{importance} .jp-Det-importanceRow")
    page.wait_for_selector(f'{history}[data-points="16"] canvas')
    _shoot(page, "search-analysis-dark", f"{view} .jp-Det-searchAnalysis")
    set_theme(page, "JupyterLab Light")

    # The widget under a notebook cell is the same view: the same analysis, the same bars.
    lab.write_notebook(
        "search-views.ipynb", ["%load_ext jupyter_determined", f"%det widget {experiment_id}"]
    )
    lab.open_notebook(page, "search-views.ipynb")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    widget = f'.jp-Det-notebookWidget[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(widget, timeout=60_000)
    page.click(f'{widget} .jp-Det-tab[data-section="hparams"]')
    page.wait_for_selector(f"{widget} .jp-Det-importance .jp-Det-importanceRow")
    in_widget = page.locator(f"{widget} .jp-Det-importanceRow")
    assert [in_widget.nth(i).get_attribute("data-hparam") for i in range(3)] == names
    page.click(f'{widget} .jp-Det-tab[data-section="curves"]')
    page.wait_for_selector(f'{widget} .jp-Det-systemCharts .jp-Det-chart[data-group="cpu"] canvas')
