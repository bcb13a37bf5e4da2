"""The workspace functions of `determined.experimental.client` (docs/team.md, "Workspaces and
projects"), over the client module's `Determined` singleton; `client` re-exports them."""

from __future__ import annotations

from determined.common.experimental.project import Project
from determined.common.experimental.workspace import Workspace
from determined.experimental import client


@client._require_singleton
def get_workspace(name: str) -> Workspace:
    """The workspace with this name (NotFoundException when none)."""
    return client._singleton().get_workspace(name)


@client._require_singleton
def list_workspaces() -> list[Workspace]:
    """Every workspace of the master."""
    return client._singleton().list_workspaces()


@client._require_singleton
def create_workspace(name: str) -> Workspace:
    """A new workspace owned by the signed-in user."""
    return client._singleton().create_workspace(name)


@client._require_singleton
def delete_workspace(name: str) -> None:
    """Delete the (empty) workspace with this name."""
    client._singleton().delete_workspace(name)


__all__ = [
    "Project",
    "Workspace",
    "create_workspace",
    "delete_workspace",
    "get_workspace",
    "list_workspaces",
]
