"""The sidebar of a user's JupyterLab that uses a shared master (docs/team.md, "Every user's
JupyterLab uses the shared master"): it lists the shared master's experiments, the owner
account's and the user's own, through the lab's proxy, and a new one appears live (the event
stream through the proxy). Screenshots (light, dark) go to docs/images/.

As in tests/jupyter/server/test_shared_master.py, a standalone master-lite stands in for the
Hub's service and `proxy_alice`'s session token for her JupyterHub API token.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests._support import MasterProcess, context_tarball
from tests._support.browser import (
    Lab,
    save_sidebar_image,
    set_theme,
    show_sidebar,
    widen_sidebar,
)

TABLE = "#jupyter-determined-sidebar .jp-Det-expTable"
ALICE = "proxy_alice"
CONFIG = {
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


class SharedLab(Lab):
    """JupyterLab of a Hub user: DET_MASTER names the shared master, JUPYTERHUB_API_TOKEN is
    the user's token, a home of its own."""

    user_env: dict[str, str] = {}

    def environment(self) -> dict[str, str]:
        return {**super().environment(), **self.user_env}


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[tuple[MasterProcess, str]]:
    with MasterProcess(tmp_path_factory.mktemp("shared-root")) as master:
        master.session.post(
            "/users", {"user": {"username": ALICE, "admin": False}, "password": "alice-pw"}
        )
        signed_in = requests.post(
            f"{master.url}/api/v1/auth/login",
            json={"username": ALICE, "password": "alice-pw"},
            timeout=30,
        )
        signed_in.raise_for_status()
        yield master, str(signed_in.json()["token"])


@pytest.fixture(scope="module")
def lab(shared, tmp_path_factory) -> Iterator[Lab]:
    master, alice_token = shared
    tmp = tmp_path_factory.mktemp("shared-lab")
    home = tmp / "home"
    home.mkdir()
    server = SharedLab(tmp)
    server.user_env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "DET_MASTER": master.url,
        "JUPYTERHUB_API_TOKEN": alice_token,
    }
    server.launch(120, interval=0.3)
    yield server
    server.stop()


def create(url: str, token: str, name: str) -> int:
    answer = requests.post(
        f"{url}/api/v1/experiments",
        json={
            "config": {**CONFIG, "name": name},
            "context": context_tarball({"train.py": "print(1)\n"}),
            "activate": False,
        },
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    answer.raise_for_status()
    return int(answer.json()["experiment"]["id"])


def listed(page: Any, ids: list[int]) -> None:
    page.wait_for_function(
        """([sel, ids]) => {
            const shown = [...document.querySelectorAll(`${sel} tr.jp-Det-expRow`)]
                .map(r => Number(r.dataset.experimentId));
            return ids.every(id => shown.includes(id));
        }""",
        arg=[TABLE, ids],
        timeout=30_000,
    )


def test_the_sidebar_lists_the_shared_masters_experiments(
    page: Any, lab: Lab, shared, extension_page_errors
) -> None:
    """Both users' experiments in one list, with their owners; live (the event stream)."""
    master, alice_token = shared
    tag = f"team{os.urandom(2).hex()}"
    owners = create(master.url, master.token, f"{tag}-owner-account")
    alices = create(master.url, alice_token, f"{tag}-alice")
    assert not (lab.root_dir / "master.json").exists()  # no master in the lab

    lab.open_in(page)
    show_sidebar(page)
    widen_sidebar(page, 520)
    page.fill(".jp-Det-nameFilter", tag)
    listed(page, [owners, alices])
    # A new experiment on the shared master shows up without a reload: the event stream.
    later = create(master.url, alice_token, f"{tag}-alice-later")
    listed(page, [owners, alices, later])
    owner_cells = page.locator(f"{TABLE} tr.jp-Det-expRow").all_inner_texts()
    assert sum(ALICE in row for row in owner_cells) == 2, owner_cells
    save_sidebar_image(page, "shared-master-sidebar-light")
    set_theme(page, "JupyterLab Dark")
    save_sidebar_image(page, "shared-master-sidebar-dark")
    set_theme(page, "JupyterLab Light")
    assert extension_page_errors() == []
