"""The experiment view's Checkpoints section in a real JupyterLab (Chromium) (issue 28, item 7).

One trial saves four checkpoints with validation losses 0.5, 0.2, 0.3 and 0.4; the 0.2 one is
then deleted. The table lists the live ones best first (smaller is better), marks the best,
hides the deleted one until "show 1 deleted" is ticked; a finished experiment that saved none
says so instead of "No checkpoints yet.". Screenshots (light and dark) go to docs/images/.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests._support import context_tarball
from tests._support.browser import set_theme

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
LOSSES = [0.5, 0.2, 0.3, 0.4]
SAVES_FOUR = f"""\
import pathlib
import determined as det

with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        for step, loss in enumerate({LOSSES!r}, start=1):
            core_context.train.report_validation_metrics(steps_completed=step,
                                                         metrics={{"val_loss": loss}})
            with core_context.checkpoint.store_path({{"steps_completed": step}}) as (path, _):
                (pathlib.Path(path) / "w.txt").write_text(str(loss))
        op.report_completed(min({LOSSES!r}))
"""
SAVES_NONE = """\
import determined as det

with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        core_context.train.report_validation_metrics(steps_completed=1, metrics={"val_loss": 1.0})
        op.report_completed(1.0)
"""


def _config(name: str) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "val_loss", "max_length": 4},
        # Keep every checkpoint: the default policy (best + latest of each trial) would GC
        # two of them once the experiment ends.
        "checkpoint_storage": {"save_trial_best": 4, "save_trial_latest": 4},
    }


def _completed(lab: Lab, name: str, script: str) -> int:
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": _config(name), "context": context_tarball({"train.py": script})},
    )["experiment"]["id"]
    lab.wait_for(
        f"{name} to complete",
        lambda: (
            lab.api("GET", f"experiments/{experiment_id}")["experiment"]["state"] == "COMPLETED"
        ),
        timeout=180,
    )
    return experiment_id


def _rows(page: Any, view: str) -> list[tuple[str, str]]:
    return page.eval_on_selector_all(
        f"{view} .jp-Det-checkpointsTable tbody tr",
        "rows => rows.map(r => [r.dataset.uuid, r.className])",
    )


def _open_checkpoints(page: Any, lab: Lab, experiment_id: int) -> str:
    page.evaluate(
        "async id => { await window.jupyterapp.commands.execute("
        "'determined:open-experiment', {id}); }",
        experiment_id,
    )
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    page.click(f'{view} .jp-Det-tab[data-section="checkpoints"]')
    return view


def test_checkpoints_best_first_marked_and_deleted_hidden(page, lab: Lab) -> None:
    experiment_id = _completed(lab, "four-checkpoints", SAVES_FOUR)
    checkpoints = lab.api("GET", f"experiments/{experiment_id}/checkpoints")["checkpoints"]
    by_loss = {c["validation_metrics"]["val_loss"]: c["uuid"] for c in checkpoints}
    assert sorted(by_loss) == sorted(LOSSES)
    lab.api("DELETE", f"checkpoints/{by_loss[0.2]}")

    lab.open_in(page)
    view = _open_checkpoints(page, lab, experiment_id)
    # The view fetches the checkpoints after it opens: wait for all three live ones.
    page.wait_for_function(
        "sel => document.querySelectorAll(sel).length === 3",
        arg=f"{view} .jp-Det-checkpointsTable tbody tr",
    )
    rows = _rows(page, view)
    assert [uuid for uuid, _ in rows] == [by_loss[0.3], by_loss[0.4], by_loss[0.5]]
    assert [uuid for uuid, cls in rows if "jp-Det-bestCheckpoint" in cls] == [by_loss[0.3]]
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    page.locator(view).screenshot(path=str(DOC_IMAGES / "sidebar-checkpoints.png"))

    page.check(f"{view} .jp-Det-showDeleted input")
    page.wait_for_selector(f'{view} .jp-Det-checkpointsTable tr[data-state="DELETED"]')
    page.wait_for_function(
        "sel => document.querySelectorAll(sel).length === 4",
        arg=f"{view} .jp-Det-checkpointsTable tbody tr",
    )
    rows = _rows(page, view)
    assert [uuid for uuid, _ in rows] == [by_loss[x] for x in (0.2, 0.3, 0.4, 0.5)]
    # Deleted, its files are gone: it is listed, but neither marked best nor usable.
    assert [uuid for uuid, cls in rows if "jp-Det-bestCheckpoint" in cls] == [by_loss[0.3]]
    assert page.locator(f'{view} .jp-Det-useInNotebook[data-uuid="{by_loss[0.2]}"]').count() == 0

    set_theme(page, "JupyterLab Dark")  # and the splash a theme change shows gone
    page.locator(view).screenshot(path=str(DOC_IMAGES / "sidebar-checkpoints-dark.png"))
    set_theme(page, "JupyterLab Light")


def test_a_finished_experiment_without_checkpoints_says_so(page, lab: Lab) -> None:
    experiment_id = _completed(lab, "no-checkpoints", SAVES_NONE)
    lab.open_in(page)
    view = _open_checkpoints(page, lab, experiment_id)
    page.wait_for_selector(
        f"{view} .jp-Det-empty:has-text('This experiment saved no checkpoints.')"
    )
    assert page.locator(f"{view} :text('No checkpoints yet.')").count() == 0
