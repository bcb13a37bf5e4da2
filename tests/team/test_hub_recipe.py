"""The jupyterhub_config.py recipe of docs/team.md ("The shared master as a JupyterHub
service") is short (at most 20 lines), loads into JupyterHub's own configuration, and sets
what the contract says: the service `determined` running `master-lite --jupyterhub`, users
with only `access:services!service=determined`, servers' tokens inheriting their user's
permissions, the service with at most the read scopes, the group `determined-admins`, and
DET_MASTER for every server."""

from __future__ import annotations

import re

from traitlets.config import Config

from tests._support.process import REPO

SECTION = "## The shared master as a JupyterHub service"


def recipe() -> str:
    text = (REPO / "docs" / "team.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


def test_the_recipe_is_at_most_20_lines_and_sets_the_contract() -> None:
    from jupyterhub.app import JupyterHub

    block = recipe()
    assert len(block.strip().splitlines()) <= 20
    c = Config()
    exec(compile(block, "docs/team.md recipe", "exec"), {"c": c})  # noqa: S102
    hub = JupyterHub(config=c)  # JupyterHub's traits check the types
    [service] = hub.services
    assert service["name"] == "determined"
    assert service["command"][0].endswith("master-lite") and "--jupyterhub" in service["command"]
    roles = {role["name"]: role for role in hub.load_roles}
    assert "access:services!service=determined" in roles["user"]["scopes"]
    assert roles["server"]["scopes"] == ["inherit"]
    allowed = {"list:users", "read:users", "list:groups", "read:groups", "read:roles"}
    service_roles = [r for r in roles.values() if "determined" in r.get("services", [])]
    assert service_roles and all(set(r["scopes"]) <= allowed for r in service_roles)
    assert "determined-admins" in hub.load_groups
    assert hub.config.Spawner.environment["DET_MASTER"].endswith("/services/determined")
