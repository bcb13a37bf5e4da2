"""The sidebar's experiment table in a real JupyterLab (Chromium), as someone with many
experiments uses it (issue 28 item 9): sort by best metric, filter by name and label, select
several rows and archive or kill them at once, rename an experiment and edit its labels and
notes (kept by the master), open experiments in ONE reused tab titled "Experiment N: name",
and a tab of its own on Ctrl-click.

The experiments with metrics are unmanaged runs (POST /unmanaged/runs, one validation each,
closed COMPLETED): the master stores their best metric at once, with no trial process to wait
for. The screenshots go to docs/images/ (docs/sidebar.md shows them), in light and dark theme.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import requests

from tests._support.browser import save_sidebar_image, set_theme, show_sidebar, widen_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

TABLE = "#jupyter-determined-sidebar .jp-Det-expTable"


def _completed_run(lab: Lab, name: str, best: float, labels: list[str]) -> int:
    """A COMPLETED experiment whose best validation `loss` is `best`."""
    run = lab.api(
        "POST",
        "unmanaged/runs",
        json={
            "name": name,
            "labels": labels,
            "searcher": {"metric": "loss", "smaller_is_better": True},
        },
    )
    trial_id = run["trial_id"]
    headers = {"Authorization": f"Bearer {run['token']}"}
    base = f"{lab.det_master}/api/v1"
    for path, body in (
        (
            f"trials/{trial_id}/metrics",
            {
                "reports": [
                    {"group": "validation", "steps_completed": 10, "metrics": {"loss": best}}
                ]
            },
        ),
        (f"unmanaged/trials/{trial_id}/close", {"state": "COMPLETED"}),
    ):
        answer = requests.post(f"{base}/{path}", json=body, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
    return int(run["experiment_id"])


def _paused_experiment(lab: Lab, name: str) -> int:
    """A managed experiment created without activating it: PAUSED, no trial running."""
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


def _listed_ids(page: Any) -> list[int]:
    return page.evaluate(
        """sel => [...document.querySelectorAll(`${sel} tr.jp-Det-expRow`)]
                  .map(row => Number(row.dataset.experimentId))""",
        TABLE,
    )


def _wait_listed(page: Any, expected: list[int]) -> None:
    page.wait_for_function(
        """([sel, ids]) => {
            const rows = [...document.querySelectorAll(`${sel} tr.jp-Det-expRow`)];
            return JSON.stringify(rows.map(r => Number(r.dataset.experimentId)))
                === JSON.stringify(ids);
        }""",
        arg=[TABLE, expected],
        timeout=30_000,
    )


def _experiment_tabs(page: Any) -> list[str]:
    """The labels of the main area's experiment tabs."""
    return page.evaluate(
        """() => [...document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tab')]
                  .filter(tab => tab.dataset.id && tab.dataset.id.startsWith('jupyter-determined-experiment-'))
                  .map(tab => tab.querySelector('.lm-TabBar-tabLabel').textContent)"""
    )


def test_sort_filter_bulk_edit_and_one_reused_tab(
    page: Any, lab: Lab, screenshot, extension_page_errors
) -> None:
    tag = f"tbl{os.urandom(2).hex()}"
    bests = {"a": 0.3, "b": 0.1, "c": 0.9, "d": 0.5}
    done = {
        key: _completed_run(
            lab, f"{tag}-{key}-search", best, ["bulk"] if key in "ab" else ["keep", "cnn"]
        )
        for key, best in bests.items()
    }
    paused = [_paused_experiment(lab, f"{tag}-paused-{i}") for i in range(2)]
    assert lab.api("GET", f"experiments/{done['b']}")["experiment"]["best_validation"] == 0.1

    lab.open_in(page)
    show_sidebar(page)
    widen_sidebar(page, 560)
    page.fill(".jp-Det-nameFilter", tag)
    newest_first = sorted([*done.values(), *paused], reverse=True)
    _wait_listed(page, newest_first)

    # Sort by best metric: smallest first, experiments without a metric last; then flipped.
    page.click(f'{TABLE} th[data-sort="best"]')
    by_best = [done["b"], done["a"], done["d"], done["c"]]
    _wait_listed(page, by_best + sorted(paused, reverse=True))
    assert page.get_attribute(f'{TABLE} th[data-sort="best"]', "aria-sort") == "ascending"
    row_b = f'{TABLE} tr[data-experiment-id="{done["b"]}"]'
    assert page.inner_text(f"{row_b} .jp-Det-expBest") == "0.1"
    save_sidebar_image(page, "sidebar-table-light")
    set_theme(page, "JupyterLab Dark")
    save_sidebar_image(page, "sidebar-table-dark")
    set_theme(page, "JupyterLab Light")
    page.click(f'{TABLE} th[data-sort="best"]')
    _wait_listed(page, by_best[::-1] + sorted(paused, reverse=True))

    # Filter: words narrow the list; label: matches labels only.
    page.fill(".jp-Det-nameFilter", f"{tag} label:bulk")
    _wait_listed(page, [done["a"], done["b"]])  # still by best, largest first
    page.fill(".jp-Det-nameFilter", tag)
    page.click(f'{TABLE} th[data-sort="id"]')  # back to newest first
    _wait_listed(page, newest_first)

    # Select the two "bulk" runs and both paused experiments: Archive applies to the finished
    # two (the paused ones are skipped), Kill to the paused two (after a confirmation).
    for experiment_id in (done["a"], done["b"], *paused):
        page.check(f'{TABLE} tr[data-experiment-id="{experiment_id}"] .jp-Det-rowSelect')
    page.wait_for_selector(".jp-Det-bulkBar:not([hidden])")
    assert page.inner_text(".jp-Det-bulkCount") == "4 selected"
    screenshot(page, "sidebar-table-selection")
    save_sidebar_image(page, "sidebar-table-bulk-light")
    page.click(".jp-Det-bulk-archive")
    lab.wait_for(
        "the bulk archive to reach the master",
        lambda: all(
            lab.api("GET", f"experiments/{i}")["experiment"]["archived"]
            for i in (done["a"], done["b"])
        ),
        timeout=30,
    )
    assert not any(lab.api("GET", f"experiments/{i}")["experiment"]["archived"] for i in paused)
    # Archived experiments leave the list (and the selection); the paused two stay selected.
    _wait_listed(page, sorted([done["c"], done["d"], *paused], reverse=True))
    page.wait_for_function(
        "() => document.querySelector('.jp-Det-bulkCount')?.textContent === '2 selected'"
    )
    assert "archive: 2 experiments, 2 skipped" in page.inner_text("#jupyter-determined-sidebar")
    page.click(".jp-Det-bulk-kill")
    page.click(".jp-Dialog .jp-mod-accept")
    lab.wait_for(
        "the bulk kill to reach the master",
        lambda: all(
            lab.api("GET", f"experiments/{i}")["experiment"]["state"]
            in {"STOPPING_CANCELED", "CANCELED"}
            for i in paused
        ),
        timeout=30,
    )
    assert lab.api("GET", f"experiments/{done['c']}")["experiment"]["state"] == "COMPLETED"

    # Rename, labels and notes: edited in the sidebar, stored by the master, shown in the row.
    row_c = f'{TABLE} tr[data-experiment-id="{done["c"]}"]'
    page.hover(row_c)
    page.click(f"{row_c} .jp-Det-rowEdit")
    page.fill(".jp-Det-editName", f"{tag}-renamed")
    page.fill(".jp-Det-editLabels", "best-so-far, cnn, best-so-far")
    page.fill(".jp-Det-editNotes", "wider layers helped")
    save_sidebar_image(page, "sidebar-table-edit-light")
    set_theme(page, "JupyterLab Dark")
    save_sidebar_image(page, "sidebar-table-edit-dark")
    set_theme(page, "JupyterLab Light")
    page.click(".jp-Det-editSave")
    page.wait_for_selector(".jp-Det-editPanel[hidden]", state="attached")
    stored = lab.api("GET", f"experiments/{done['c']}")["experiment"]
    assert stored["name"] == f"{tag}-renamed"
    assert stored["labels"] == ["best-so-far", "cnn"]
    assert stored["notes"] == "wider layers helped"
    page.wait_for_function(
        "([sel, name]) => document.querySelector(`${sel} .jp-Det-expName`)?.textContent === name",
        arg=[row_c, f"{tag}-renamed"],
    )
    labels = page.locator(f"{row_c} .jp-Det-expLabels .jp-Det-label").all_inner_texts()
    assert labels == ["best-so-far", "cnn"]
    # ... and after a reload, from the master.
    lab.open_in(page)
    show_sidebar(page)
    page.fill(".jp-Det-nameFilter", "label:best-so-far")
    _wait_listed(page, [done["c"]])

    # One tab, reused, with a readable title; Ctrl-click opens a tab of its own.
    page.fill(".jp-Det-nameFilter", tag)
    _wait_listed(page, sorted([done["c"], done["d"], *paused], reverse=True))
    save_sidebar_image(
        page, "sidebar-table-narrow-light"
    )  # the panel's default width: fewer columns
    page.click(row_c)
    page.wait_for_function(
        "title => [...document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tabLabel')]"
        ".some(label => label.textContent === title)",
        arg=f"Experiment {done['c']}: {tag}-renamed",
    )
    row_d = f'{TABLE} tr[data-experiment-id="{done["d"]}"]'
    page.click(row_d)
    page.wait_for_function(
        "title => [...document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tabLabel')]"
        ".some(label => label.textContent === title)",
        arg=f"Experiment {done['d']}: {tag}-d-search",
    )
    assert _experiment_tabs(page) == [f"Experiment {done['d']}: {tag}-d-search"]
    page.click(row_c, modifiers=["Control"])
    page.wait_for_function(
        "() => document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tab"
        '[data-id^="jupyter-determined-experiment-"]\').length === 2'
    )
    # The new tab reads "Experiment N" until its view has loaded the name.
    expected = sorted(
        [f"Experiment {done['d']}: {tag}-d-search", f"Experiment {done['c']}: {tag}-renamed"]
    )
    lab.wait_for(
        "both experiment tabs with their titles",
        lambda: sorted(_experiment_tabs(page)) == expected,
        timeout=30,
    )
    screenshot(page, "sidebar-table-tabs")

    # Delete: the archived two, shown with "archived", deleted after a confirmation.
    page.check(".jp-Det-archivedFilter")
    for experiment_id in (done["a"], done["b"]):
        page.check(f'{TABLE} tr[data-experiment-id="{experiment_id}"] .jp-Det-rowSelect')
    page.click(".jp-Det-bulk-delete")
    page.click(".jp-Dialog .jp-mod-accept")
    _wait_listed(page, sorted([done["c"], done["d"], *paused], reverse=True))
    gone = requests.get(
        f"{lab.det_master}/api/v1/experiments/{done['a']}",
        headers={"Authorization": f"token {lab.token}"},
        timeout=30,
    )
    assert gone.status_code == 404, gone.text
    assert not extension_page_errors()
