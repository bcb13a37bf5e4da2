"""The sidebar's Models section end to end: a real `jupyter lab` with jupyter_determined and
Chromium. A model registered through the API shows in the panel with its versions, each naming
its checkpoint's experiment, trial, step and validation metrics; registering, creating and
deleting through the API change the panel without a reload; a version opens its experiment.
Screenshots in the light and the dark theme go to docs/images/ (docs/sidebar.md shows them).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests._support import context_tarball
from tests._support.browser import set_theme, show_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
# Markup in a model name must show as text (a name cannot hold slashes, so no closing tag).
HOSTILE_NAME = '<img src=x onerror="window.__detInjected=1">model'

TRAIN_PY = """
import pathlib
from determined import core

with core.init() as core_context:
    for op in core_context.searcher.operations():
        for step in range(1, op.length + 1):
            core_context.train.report_validation_metrics(
                steps_completed=step, metrics={"loss": 1 / step, "accuracy": step / 4}
            )
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (pathlib.Path(path) / "weights").write_text(str(step))
        op.report_completed(1 / op.length)
"""

CONFIG = {
    "name": "registry-source",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 2}},
    "checkpoint_storage": {"save_trial_best": 5, "save_trial_latest": 5},
}


def _shoot(page: Any, name: str) -> None:
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    page.locator("#jupyter-determined-sidebar").screenshot(path=str(DOC_IMAGES / f"{name}.png"))


def test_models_versions_live_updates_and_opening_the_experiment(
    page, lab: Lab, screenshot, extension_page_errors
) -> None:
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": CONFIG, "context": context_tarball({"train.py": TRAIN_PY})},
    )["experiment"]["id"]
    finished = lab.wait_experiment(experiment_id, timeout=180)
    assert finished["experiment"]["state"] == "COMPLETED"
    trial_id = finished["trials"][0]["id"]
    checkpoints = sorted(
        lab.api("GET", f"experiments/{experiment_id}/checkpoints")["checkpoints"],
        key=lambda c: c["steps_completed"],
    )
    lab.open_in(page)
    show_sidebar(page)
    # An empty registry says how to fill it.
    empty = page.wait_for_selector(".jp-Det-models-empty")
    assert "No models yet." in empty.inner_text()
    assert page.inner_text(".jp-Det-models-title") == "Models (0)"
    screenshot(page, "sidebar-models-empty")

    lab.api(
        "POST",
        "models",
        json={"name": "mnist-cnn", "description": "digits", "labels": ["cv", "prod"]},
    )
    lab.api(
        "POST",
        "models/mnist-cnn/versions",
        json={"checkpoint_uuid": checkpoints[0]["uuid"], "name": "baseline"},
    )

    row = '.jp-Det-modelRow[data-model-name="mnist-cnn"]'
    page.wait_for_selector(f"{row} .jp-Det-modelVersions:has-text('1 version')")
    assert page.inner_text(f"{row} .jp-Det-modelLabels").split() == ["cv", "prod"]

    page.click(f"{row} .jp-Det-modelRow-head")
    first = page.wait_for_selector(f'{row} .jp-Det-versionRow[data-version="1"]')
    text = first.inner_text()
    assert "v1 · baseline" in text
    assert f"experiment {experiment_id} · trial {trial_id} · step 1" in text
    assert "accuracy 0.25, loss 1" in text
    assert checkpoints[0]["uuid"][:8] in text

    # Live: a new version, a new model and a deletion arrive without a reload.
    lab.api("POST", "models/mnist-cnn/versions", json={"checkpoint_uuid": checkpoints[1]["uuid"]})
    second = page.wait_for_selector(f'{row} .jp-Det-versionRow[data-version="2"]')
    assert f"trial {trial_id} · step 2" in second.inner_text()
    versions = page.locator(f"{row} .jp-Det-versionRow")
    assert [versions.nth(i).get_attribute("data-version") for i in range(2)] == ["2", "1"]
    page.wait_for_selector(f"{row} .jp-Det-modelVersions:has-text('2 versions')")

    # The docs' images show the registry as a user has it, before the hostile name below.
    set_theme(page, "JupyterLab Light")
    _shoot(page, "sidebar-models-light")
    set_theme(page, "JupyterLab Dark")
    _shoot(page, "sidebar-models-dark")
    set_theme(page, "JupyterLab Light")

    hostile = lab.api("POST", "models", json={"name": HOSTILE_NAME})["model"]
    hostile_row = f'.jp-Det-modelRow[data-model-id="{hostile["id"]}"]'
    page.wait_for_selector(hostile_row)
    assert page.inner_text(f"{hostile_row} .jp-Det-modelName") == HOSTILE_NAME
    assert page.evaluate("() => window.__detInjected") is None
    assert page.inner_text(".jp-Det-models-title") == "Models (2)"

    lab.api("DELETE", f"models/{hostile['id']}")
    page.wait_for_selector(hostile_row, state="detached")
    assert page.inner_text(".jp-Det-models-title") == "Models (1)"

    # A version opens the experiment of its checkpoint.
    page.click(f'{row} .jp-Det-versionRow[data-version="1"]')
    page.wait_for_selector(
        f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    )
    assert not extension_page_errors()
