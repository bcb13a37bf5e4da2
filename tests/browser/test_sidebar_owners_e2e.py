"""The sidebar shows whose an experiment is and filters by user and by workspace, in a real
JupyterLab (Chromium), on a master with two users (docs/team.md, "Workspaces and projects").

ann and ben sign in with passwords (POST /auth/login) and submit experiments with their own
session tokens; one of ann's goes into the workspace "vision". The sidebar (the owner account's
JupyterLab) lists all three with a User column naming each owner; the user dropdown narrows the
list to ann's, the workspace dropdown to the one in "vision". Screenshots (light and dark) go
to docs/images/ (docs/team.md shows them).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import requests

from tests._support.browser import save_sidebar_image, set_theme, show_sidebar, widen_sidebar

if TYPE_CHECKING:  # the `lab` fixture comes from this folder's conftest.py
    from tests._support.browser import Lab

TABLE = "#jupyter-determined-sidebar .jp-Det-expTable"


def _signed_in(lab: Lab, name: str) -> str:
    """A new user's session token (the owner account, an admin, makes the account)."""
    lab.api("POST", "users", json={"user": {"username": name}, "password": f"{name}-pw"})
    # Jupyter asks a token-less POST for its XSRF cookie: the server's token passes that
    # check (a program's request, not a form's); the body's credentials decide the sign-in.
    answer = requests.post(
        f"{lab.det_master}/api/v1/auth/login",
        json={"username": name, "password": f"{name}-pw"},
        headers={"Authorization": f"token {lab.token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["token"])


def _submit(lab: Lab, token: str, name: str, **place: Any) -> int:
    """A paused experiment of the token's user (nothing runs)."""
    config = {
        "name": name,
        "entrypoint": "python3 -c pass",
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        **place,
    }
    answer = requests.post(
        f"{lab.det_master}/api/v1/experiments",
        json={"config": config, "context": None, "activate": False},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["experiment"]["id"])


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


def _owners_shown(page: Any) -> dict[int, str]:
    return page.evaluate(
        """sel => Object.fromEntries([...document.querySelectorAll(`${sel} tr.jp-Det-expRow`)]
                  .map(r => [r.dataset.experimentId,
                             r.querySelector('.jp-Det-col-owner')?.textContent ?? null]))""",
        TABLE,
    )


def test_owners_are_named_and_the_user_and_workspace_filters_narrow_the_list(
    page: Any, lab: Lab, extension_page_errors
) -> None:
    tag = f"own{os.urandom(2).hex()}"
    # Accounts of this Lab's master only (not Unix users): short names, for the screenshot.
    ann, ben = _signed_in(lab, "ann"), _signed_in(lab, "ben")
    workspace = requests.post(
        f"{lab.det_master}/api/v1/workspaces",
        json={"name": "vision"},
        headers={"Authorization": f"Bearer {ann}"},
        timeout=30,
    ).json()["workspace"]
    requests.post(
        f"{lab.det_master}/api/v1/workspaces/{workspace['id']}/projects",
        json={"name": "detection"},
        headers={"Authorization": f"Bearer {ann}"},
        timeout=30,
    ).raise_for_status()
    ann_default = _submit(lab, ann, f"{tag}-ann-baseline")
    ann_vision = _submit(
        lab, ann, f"{tag}-ann-detector", workspace=workspace["name"], project="detection"
    )
    ben_default = _submit(lab, ben, f"{tag}-ben-sweep")

    lab.open_in(page)
    show_sidebar(page)
    widen_sidebar(page, 620)
    page.fill(".jp-Det-nameFilter", tag)
    _wait_listed(page, [ben_default, ann_vision, ann_default])
    # Whose each experiment is: the User column names the owner.
    assert page.is_visible(f'{TABLE} th[data-sort="owner"]')
    assert _owners_shown(page) == {
        str(ben_default): "ben",
        str(ann_vision): "ann",
        str(ann_default): "ann",
    }

    # The user dropdown lists the owners; choosing ann leaves her two.
    owner_filter = "#jupyter-determined-sidebar .jp-Det-ownerFilter"
    page.wait_for_selector(f"{owner_filter}:not([hidden])")
    options = page.eval_on_selector_all(f"{owner_filter} option", "os => os.map(o => o.value)")
    assert "ann" in options and "ben" in options
    page.select_option(owner_filter, "ann")
    _wait_listed(page, [ann_vision, ann_default])
    assert page.inner_text(".jp-Det-listStatus").startswith("2 of ")

    # The workspace dropdown: only the experiment in "vision".
    workspace_filter = "#jupyter-determined-sidebar .jp-Det-workspaceFilter"
    page.select_option(workspace_filter, workspace["name"])
    _wait_listed(page, [ann_vision])
    page.select_option(owner_filter, "")
    _wait_listed(page, [ann_vision])
    page.select_option(workspace_filter, "")
    page.select_option(owner_filter, "ben")
    _wait_listed(page, [ben_default])
    page.select_option(owner_filter, "")
    _wait_listed(page, [ben_default, ann_vision, ann_default])

    save_sidebar_image(page, "sidebar-owners-light")
    set_theme(page, "JupyterLab Dark")
    save_sidebar_image(page, "sidebar-owners-dark")
    set_theme(page, "JupyterLab Light")
    assert extension_page_errors() == []
