"""A store written before migration 9 (workspaces and projects) opens, upgrades, and every
experiment in it is in Determined's default project "Uncategorized" of the default workspace."""

from __future__ import annotations

from pathlib import Path

from master_lite.store import DEFAULT_PROJECT_ID, MIGRATIONS, Store
from tests.master_lite.store.test_migration_users import old_store


def test_migration_9_puts_old_experiments_in_the_default_project(tmp_path: Path) -> None:
    db = tmp_path / "master.db"
    old_store(db, version=8)
    store = Store(db)
    assert store.schema_version() == len(MIGRATIONS) >= 9
    experiment = store.experiments.get(1)
    assert experiment is not None and experiment.notes == "kept"
    assert experiment.project_id == DEFAULT_PROJECT_ID
    [workspace] = store.workspaces.all()
    [project] = store.projects.all()
    assert (workspace.id, workspace.name) == (1, "Uncategorized")
    assert (project.id, project.name, project.workspace_id) == (1, "Uncategorized", 1)
    assert store.projects.counts() == {1: (1, 0)}
    store.close()


def test_migration_11_gives_old_workspaces_no_quota_and_the_masters_default_pool(
    tmp_path: Path,
) -> None:
    db = tmp_path / "master.db"
    old_store(db, version=9)
    store = Store(db)
    assert store.schema_version() == len(MIGRATIONS) >= 11
    [workspace] = store.workspaces.all()
    assert (workspace.default_compute_pool, workspace.resource_quota) == ("", None)
    assert store.workspaces.resource_quotas() == {}
    store.workspaces.set_resource_quota(1, 4)
    store.workspaces.set_default_pool(1, "gpu")
    assert store.workspaces.resource_quotas() == {1: 4}
    found = store.workspaces.of_project(1)
    assert found is not None and found.default_compute_pool == "gpu"
    assert store.workspaces.of_project(99) is None
    store.close()
