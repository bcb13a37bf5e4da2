"""`det workspace …`, `det project …`, `det e create --project_id`, `det e move`, `det e list`'s
Owner and --show_project columns, and the SDK's workspaces and projects, through a real
master-lite (docs/team.md, "Workspaces and projects")."""

from __future__ import annotations

import getpass
import json
import pathlib

import pytest
import yaml

from determined.common.api import errors as api_errors
from determined.experimental import client
from tests._support import MasterProcess
from tests.cli.test_cli_users import CONFIG, experiment_of
from tests.cli.test_cli_verbs import det, failed, local_env, ok, remote_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("spaces-root")) as process:
        yield process


def table(text: str) -> list[list[str]]:
    """The rows of a `det` table (header first), cells stripped."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("-")]
    return [[cell.strip() for cell in line.split("|")] for line in lines]


def test_workspace_and_project_commands(master, tmp_path):
    env = local_env(master, tmp_path / "owner")
    rows = table(ok(det(env, "workspace", "list")))
    assert rows[0][:3] == ["ID", "Name", "# Projects"] and rows[1][:3] == [
        "1",
        "Uncategorized",
        "1",
    ]
    ok(det(env, "workspace", "create", "vision"))
    failed(det(env, "workspace", "create", "vision"), "'vision' already exists")
    created = json.loads(ok(det(env, "w", "create", "speech", "--json")))
    assert created["name"] == "speech" and created["username"] == getpass.getuser()

    rows = table(ok(det(env, "project", "create", "vision", "detection", "--description", "boxes")))
    assert rows[0] == ["ID", "Key", "Name", "Description", "# Experiments", "# Active Experiments"]
    assert rows[1][1:5] == ["DETEC", "detection", "boxes", "0"]
    project_id = int(rows[1][0])
    assert "detection" in ok(det(env, "workspace", "list-projects", "vision"))
    assert "detection" in ok(det(env, "project", "list", "vision"))
    failed(det(env, "project", "list", "nowhere"), "workspace 'nowhere' not found")

    # An experiment placed by the config's names, another by --project_id.
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        yaml.safe_dump({**CONFIG, "workspace": "vision", "project": "detection"})
    )
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "train.py").write_text("print(1)\n")
    ok(det(env, "e", "create", "--paused", str(config_file), str(context)))
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(CONFIG))
    ok(
        det(
            env,
            "e",
            "create",
            "--paused",
            "--project_id",
            str(project_id),
            str(plain),
            str(context),
        )
    )
    listed = table(ok(det(env, "project", "list-experiments", "vision", "detection")))
    assert listed[0][:3] == ["ID", "Owner", "Name"] and len(listed) == 3
    assert {row[1] for row in listed[1:]} == {getpass.getuser()}
    described = ok(det(env, "project", "describe", "vision", "detection"))
    assert "Associated Experiments" in described

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**CONFIG, "workspace": "nope", "project": "x"}))
    failed(det(env, "e", "create", str(bad), str(context)), "det workspace list")

    # det e list: Owner second; --show_project puts the workspace and project first.
    rows = table(ok(det(env, "e", "list", "--show_project")))
    assert rows[0][:4] == ["Workspace", "Project", "ID", "Owner"]
    assert ["vision", "detection"] in [row[:2] for row in rows[1:]]

    # Not empty: refused, naming what is in it; moved out, it goes.
    failed(det(env, "workspace", "delete", "vision", "--yes"), "1 project(s) ('detection')")
    failed(det(env, "project", "delete", "vision", "detection", "--yes"), "2 experiment(s)")
    for row in listed[1:]:
        out = ok(det(env, "e", "move", row[0], "Uncategorized", "Uncategorized"))
        assert f'Moved experiment {row[0]} to project "Uncategorized"' in out
    assert "Successfully deleted project detection." in ok(
        det(env, "project", "delete", "vision", "detection", "--yes")
    )
    assert "Successfully archived workspace vision." in ok(det(env, "w", "archive", "vision"))
    failed(det(env, "project", "create", "vision", "p2"), "archived")
    assert "un-archived" in ok(det(env, "w", "unarchive", "vision"))
    assert "Successfully deleted workspace vision." in ok(
        det(env, "workspace", "delete", "vision", "--yes")
    )
    failed(det(env, "workspace", "describe", "vision"), "not found")


def test_another_users_workspace_is_theirs_to_edit(master, tmp_path):
    admin = local_env(master, tmp_path / "admin")
    ok(det(admin, "user", "create", "spaces_carl", "--password", "Carl-pw12"))
    carl = remote_env(master, tmp_path / "carl")
    ok(det(carl, "user", "login", "spaces_carl", stdin="Carl-pw12\n"))
    ok(det(admin, "workspace", "create", "owners"))
    failed(
        det(carl, "workspace", "delete", "owners", "--yes"),
        f"workspace 'owners' belongs to {getpass.getuser()}",
    )
    ok(det(carl, "project", "create", "owners", "carls"))  # anyone signed in may add one
    rows = table(ok(det(carl, "e", "list")))
    assert rows[0][:2] == ["ID", "Owner"]


def test_sdk_workspaces_projects_and_project_id(master, tmp_path: pathlib.Path):
    d = client.Determined(master.url, token=master.token)
    workspace = d.create_workspace("sdk-space")
    assert workspace.name == "sdk-space" and workspace.id > 1
    assert "sdk-space" in [w.name for w in d.list_workspaces()]
    project = workspace.create_project("sdk-proj", description="made by the SDK")
    assert project.workspace_id == workspace.id and project.description == "made by the SDK"
    assert [p.name for p in d.get_workspace("sdk-space").list_projects()] == ["sdk-proj"]

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "train.py").write_text("print(1)\n")
    experiment = d.create_experiment(CONFIG, model_dir, project_id=project.id)
    assert experiment.project_id == project.id and experiment.workspace_id == workspace.id
    experiment.kill()
    assert [e.id for e in d.list_experiments(project_id=project.id)] == [experiment.id]
    assert [e.id for e in project.list_experiments()] == [experiment.id]
    mine = d.list_experiments(users=[getpass.getuser()])
    assert experiment.id in [e.id for e in mine]
    assert d.list_experiments(users=["nobody-here"]) == []

    with pytest.raises(api_errors.APIException, match="not empty"):
        workspace.delete_project("sdk-proj")
    experiment.move_to_project("Uncategorized", "Uncategorized")
    assert d.get_experiment(experiment.id).project_id == 1
    workspace.delete_project("sdk-proj")
    d.delete_workspace("sdk-space")
    with pytest.raises(api_errors.NotFoundException, match="sdk-space"):
        d.get_workspace("sdk-space")
    other = experiment_of(master, master.token)
    assert d.get_experiment(other).project_id == 1
