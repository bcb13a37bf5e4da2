"""Making something new from results, in a real JupyterLab (Chromium), issue 28 item 10:

* Fork… in the experiment's header: the parent's config, edited in the dialog, and its model
  definition; a refused config keeps the edit and shows the master's message;
* ↻ on a trial: re-run with these hyperparameters, or continue from its latest checkpoint
  for a longer max_length; the notification's Open opens the new experiment;
* Register… on a checkpoint: a new model in the registry, and Use on that model version in
  the sidebar inserts the cell that loads it into the open notebook.

Screenshots (light and dark) go to docs/images/ (docs/sidebar.md shows them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from tests._support import context_tarball
from tests._support.browser import set_theme, show_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
TRAIN_PY = """
import pathlib
from determined import core

with core.init() as core_context:
    for op in core_context.searcher.operations():
        core_context.train.report_validation_metrics(
            steps_completed=op.length, metrics={"loss": 1 / op.length}
        )
        with core_context.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
            (pathlib.Path(path) / "weights_saved_by_core.txt").write_text(str(op.length))
        op.report_completed(1 / op.length)
"""
CONFIG: dict[str, Any] = {
    "name": "actions-parent",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "hyperparameters": {"lr": {"type": "double", "minval": 0.01, "maxval": 0.1}},
    "searcher": {
        "name": "random",
        "metric": "loss",
        "max_trials": 2,
        "max_length": {"batches": 2},
    },
}
DIALOG = ".jp-Dialog"
# The sources of the cells of the notebook `name` in the main area, through its shared model.
NOTEBOOK_CELLS = """name => {
    for (const widget of window.jupyterapp.shell.widgets('main')) {
        const context = widget.context;
        if (context && context.path === name && widget.content && widget.content.model) {
            return widget.content.model.sharedModel.cells.map(cell => cell.getSource());
        }
    }
    return null;
}"""


def _completed_parent(lab: Lab) -> dict:
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": CONFIG, "context": context_tarball({"train.py": TRAIN_PY})},
    )["experiment"]["id"]
    finished = lab.wait_experiment(experiment_id, timeout=180)
    assert finished["experiment"]["state"] == "COMPLETED"
    return finished


def _open_experiment(page: Any, experiment_id: int) -> str:
    page.evaluate(
        "async id => { await window.jupyterapp.commands.execute("
        "'determined:open-experiment', {id}); }",
        experiment_id,
    )
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    page.wait_for_selector(f"{view} .jp-Det-expHeader .jp-Det-state")
    return view


def _children(lab: Lab, parent_id: int) -> list[dict]:
    return [
        e for e in lab.api("GET", "experiments")["experiments"] if e.get("parent_id") == parent_id
    ]


def _shoot(page: Any, selector: str, name: str) -> None:
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    for theme, suffix in (("JupyterLab Light", ""), ("JupyterLab Dark", "-dark")):
        set_theme(page, theme)
        page.locator(selector).first.screenshot(path=str(DOC_IMAGES / f"{name}{suffix}.png"))
    set_theme(page, "JupyterLab Light")


def test_fork_rerun_and_continue_from_the_experiment_tab(page, lab: Lab) -> None:
    finished = _completed_parent(lab)
    parent_id = finished["experiment"]["id"]
    trials = sorted(finished["trials"], key=lambda t: t["id"])
    lab.open_in(page)
    view = _open_experiment(page, parent_id)

    # Fork…: a config error keeps the edit and says what is wrong.
    page.click(f"{view} .jp-Det-fork")
    area = f"{DIALOG} .jp-Det-forkConfig"
    page.wait_for_selector(area)
    config = json.loads(page.input_value(area))
    assert config["name"] == "actions-parent" and config["searcher"]["name"] == "random"
    _shoot(page, f"{DIALOG} .jp-Dialog-content", "fork-dialog")
    broken = {**config, "searcher": {**config["searcher"], "max_trials": "many"}}
    page.fill(area, json.dumps(broken, indent=2))
    page.click(f"{DIALOG} .jp-mod-accept")
    page.wait_for_selector(f"{DIALOG} .jp-Det-dialogProblem:has-text('max_trials')")
    assert json.loads(page.input_value(area))["searcher"]["max_trials"] == "many"
    forked_config = {
        **config,
        "name": "forked-by-hand",
        "searcher": {**config["searcher"], "max_trials": 1},
    }
    page.fill(area, json.dumps(forked_config, indent=2))
    page.click(f"{DIALOG} .jp-mod-accept")
    page.wait_for_selector("text=forked from experiment")
    [forked] = _children(lab, parent_id)
    assert forked["name"] == "forked-by-hand"

    # ↻ on a trial: continue from its checkpoint, longer; then re-run another from scratch.
    page.click(f'{view} .jp-Det-tab[data-section="trials"]')
    page.click(f'{view} .jp-Det-runAgain[data-run-again="{trials[0]["id"]}"]')
    page.wait_for_selector(f"{DIALOG} .jp-Det-trialRunDialog")
    assert page.input_value(f"{DIALOG} .jp-Det-maxLength") == "2"
    page.check(f"{DIALOG} input[data-mode='continue']")
    page.fill(f"{DIALOG} .jp-Det-maxLength", "4")
    _shoot(page, f"{DIALOG} .jp-Dialog-content", "trial-continue-dialog")
    page.click(f"{DIALOG} .jp-mod-accept")
    page.wait_for_selector(f"text=continues trial {trials[0]['id']} from its checkpoint")
    continued = next(e for e in _children(lab, parent_id) if "continued" in e["name"])
    searcher = lab.api("GET", f"experiments/{continued['id']}")["experiment"]["config"]["searcher"]
    assert searcher["source_trial_id"] == trials[0]["id"]
    assert searcher["max_length"] == {"batches": 4}

    page.click(f'{view} .jp-Det-runAgain[data-run-again="{trials[1]["id"]}"]')
    page.wait_for_selector(f"{DIALOG} .jp-Det-trialRunDialog")
    assert page.is_checked(f"{DIALOG} input[data-mode='rerun']")
    page.click(f"{DIALOG} .jp-mod-accept")
    announced = f'.Toastify__toast:has-text("trial {trials[1]["id"]}\'s hyperparameters")'
    page.wait_for_selector(announced)
    rerun = next(e for e in _children(lab, parent_id) if "re-run" in e["name"])
    # The notification's Open opens the new experiment's tab.
    page.click(f"{announced} button:has-text('Open')")
    page.wait_for_selector(
        f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{rerun["id"]}"]'
    )
    rerun_done = lab.wait_experiment(rerun["id"], timeout=180)
    assert rerun_done["trials"][0]["hparams"] == trials[1]["hparams"]


def test_register_a_checkpoint_then_use_the_model_version(page, lab: Lab) -> None:
    finished = _completed_parent(lab)
    experiment_id = finished["experiment"]["id"]
    uuid = lab.api("GET", f"experiments/{experiment_id}/checkpoints")["checkpoints"][0]["uuid"]
    lab.write_notebook("use-model.ipynb", ["x = 1"])
    lab.open_notebook(page, "use-model.ipynb")
    view = _open_experiment(page, experiment_id)
    page.click(f'{view} .jp-Det-tab[data-section="checkpoints"]')
    page.click(f'{view} .jp-Det-register[data-uuid="{uuid}"]')
    page.wait_for_selector(f"{DIALOG} .jp-Det-registerDialog")
    # An empty registry: "New model…" is the choice, and a bad name is refused in place.
    assert page.input_value(f"{DIALOG} .jp-Det-registerModel") == ""
    page.fill(f"{DIALOG} .jp-Det-registerNewName", "123")
    page.click(f"{DIALOG} .jp-mod-accept")
    page.wait_for_selector(f"{DIALOG} .jp-Det-dialogProblem:has-text('only digits')")
    page.fill(f"{DIALOG} .jp-Det-registerNewName", "actions-model")
    page.fill(f"{DIALOG} .jp-Det-registerComment", "from the e2e test")
    _shoot(page, f"{DIALOG} .jp-Dialog-content", "register-dialog")
    page.click(f"{DIALOG} .jp-mod-accept")
    page.wait_for_selector("text=Registered as actions-model version 1")
    [version] = lab.api("GET", "models/actions-model/versions")["model_versions"]
    assert version["checkpoint_uuid"] == uuid and version["comment"] == "from the e2e test"

    # Use on the version in the sidebar's Models section: the cell goes into the notebook.
    show_sidebar(page)
    row = '.jp-Det-modelRow[data-model-name="actions-model"]'
    page.click(f"{row} .jp-Det-modelRow-head")
    use = f'{row} .jp-Det-versionUse[data-uuid="{uuid}"]'
    page.wait_for_selector(use)
    _shoot(page, ".jp-Det-models", "sidebar-model-use")
    page.click(use)
    page.click(f"{DIALOG} .jp-mod-accept")  # which notebook: the one open
    lab.wait_for(
        "the inserted cell",
        lambda: len(page.evaluate(NOTEBOOK_CELLS, "use-model.ipynb") or []) == 2,
        timeout=30,
    )
    inserted = page.evaluate(NOTEBOOK_CELLS, "use-model.ipynb")[1]
    assert f'client.get_checkpoint("{uuid}")' in inserted


def test_a_notification_says_when_an_experiment_of_this_notebook_ends(page, lab: Lab) -> None:
    config = {**CONFIG, "name": "notify-me", "searcher": {**CONFIG["searcher"], "max_trials": 1}}
    lab.write_notebook(
        "notify.ipynb",
        [
            "%load_ext jupyter_determined",
            f"config = {config!r}",
            "%%det_submit config\n" + TRAIN_PY,
        ],
    )
    lab.open_notebook(page, "notify.ipynb")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    widget = ".jp-Det-notebookWidget"
    page.wait_for_selector(widget, timeout=240_000)
    experiment_id = int(page.get_attribute(widget, "data-experiment-id"))
    # The widget has the same Fork… as the experiment's tab (one implementation).
    page.wait_for_selector(f"{widget} .jp-Det-fork")
    toast = (
        f".Toastify :text('Experiment {experiment_id} \"notify-me\" (from notify.ipynb) completed')"
    )
    page.wait_for_selector(toast, timeout=180_000)
    assert "best loss 0.5" in page.inner_text(".Toastify")
    _shoot(page, ".Toastify__toast", "notification-experiment-ended")
    # Its Open button opens the experiment.
    page.click(f".Toastify__toast:has-text('Experiment {experiment_id} ') button:has-text('Open')")
    page.wait_for_selector(
        f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{experiment_id}"]'
    )


PRINTS = """
import determined as det

info = det.get_cluster_info()
with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        print(f"hello from trial {info.trial.trial_id}", flush=True)
        if info.trial.hparams["lr"] > 0.05:
            print("WARNING: learning rate high, loss may diverge", flush=True)
        core_context.train.report_validation_metrics(steps_completed=op.length,
                                                     metrics={"loss": 1.0})
        op.report_completed(1.0)
"""


def test_all_trials_logs_with_search(page, lab: Lab) -> None:
    config = {
        **CONFIG,
        "name": "logs-all-trials",
        "hyperparameters": {"lr": {"type": "categorical", "vals": [0.01, 0.09]}},
        "searcher": {"name": "grid", "metric": "loss", "max_length": {"batches": 2}},
    }
    experiment_id = lab.api(
        "POST",
        "experiments",
        json={"config": config, "context": context_tarball({"train.py": PRINTS})},
    )["experiment"]["id"]
    finished = lab.wait_experiment(experiment_id, timeout=180)
    trial_ids = sorted(t["id"] for t in finished["trials"])
    high = next(t["id"] for t in finished["trials"] if t["hparams"]["lr"] == 0.09)
    lab.open_in(page)
    view = _open_experiment(page, experiment_id)
    page.click(f'{view} .jp-Det-tab[data-section="logs"]')
    page.select_option(f"{view} .jp-Det-logTrial", "all")
    lines = f"{view} .jp-Det-logLine"
    for trial_id in trial_ids:
        page.wait_for_selector(f"{lines}:has-text('[trial {trial_id}]'):has-text('hello from')")
    page.fill(f"{view} .jp-Det-logSearch", "learning RATE")
    page.wait_for_function(
        """sel => { const shown = [...document.querySelectorAll(sel)];
                   return shown.length > 0 && shown.every(l => l.innerText.includes('learning rate'));
                 }""",
        arg=lines,
    )
    shown = page.locator(lines)
    assert {shown.nth(i).get_attribute("data-trial-id") for i in range(shown.count())} == {
        str(high)
    }
    _shoot(page, f"{view} .jp-Det-logsSection", "logs-all-trials-search")
    # The same search over HTTP: every trial's whole history.
    found = lab.api("GET", f"experiments/{experiment_id}/logs", params={"search": "learning rate"})
    assert {entry["trial_id"] for entry in found["logs"]} == {high}


def _finished_run(lab: Lab, name: str, lr: float, losses: list[float]) -> int:
    """A COMPLETED experiment (an unmanaged run: no trial process to wait for) whose one
    trial has hyperparameter `lr` and validated `losses` at steps 1, 2, ..."""
    run = lab.api(
        "POST",
        "unmanaged/runs",
        json={"name": name, "hparams": {"lr": lr}, "searcher": {"metric": "loss"}},
    )
    headers = {"Authorization": f"Bearer {run['token']}"}
    base = f"{lab.det_master}/api/v1"
    reports = [
        {"group": "validation", "steps_completed": step, "metrics": {"loss": loss}}
        for step, loss in enumerate(losses, start=1)
    ]
    for path, body in (
        (f"trials/{run['trial_id']}/metrics", {"reports": reports}),
        (f"unmanaged/trials/{run['trial_id']}/close", {"state": "COMPLETED"}),
    ):
        answer = requests.post(f"{base}/{path}", json=body, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
    return int(run["experiment_id"])


def test_compare_experiments_side_by_side(page, lab: Lab) -> None:
    first = _finished_run(lab, "cmp-small-lr", 0.001, [0.9, 0.5, 0.3])
    second = _finished_run(lab, "cmp-large-lr", 0.1, [0.8, 0.6, 0.55])
    lab.open_in(page)
    show_sidebar(page)
    table = "#jupyter-determined-sidebar .jp-Det-expTable"
    compare = "#jupyter-determined-sidebar .jp-Det-bulk-compare"
    page.check(f'{table} tr[data-experiment-id="{first}"] .jp-Det-rowSelect')
    assert page.is_disabled(compare)  # one experiment is no comparison
    page.check(f'{table} tr[data-experiment-id="{second}"] .jp-Det-rowSelect')
    page.click(compare)
    view = ".jp-Det-crossCompare"
    page.wait_for_selector(f"{view} .jp-Det-compareTable, {view} table")
    summary = page.inner_text(f"{view} .jp-Det-crossList")
    assert f"#{first} cmp-small-lr" in summary and f"#{second} cmp-large-lr" in summary
    text = page.inner_text(view)
    assert "0.001" in text and "0.1" in text  # the hyperparameter that differs
    page.wait_for_selector(f"{view} .jp-Det-compare canvas, {view} .jp-Det-compare svg")
    _shoot(page, view, "compare-experiments")
    # An experiment's name opens it.
    page.click(f'{view} li[data-experiment-id="{first}"] .jp-Det-linkButton')
    page.wait_for_selector(
        f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{first}"]'
    )
