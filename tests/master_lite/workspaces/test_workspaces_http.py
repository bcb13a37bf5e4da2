"""Workspaces and projects over HTTP against a real Master (docs/team.md, "Workspaces and
projects"): Determined's default "Uncategorized" workspace and project, creating and placing
experiments by `projectId` or the config's `workspace`/`project`, moving them, refusing to
delete what is not empty, and the owner-or-admin rule for editing."""

from __future__ import annotations

from tests._support import context_tarball
from tests.master_lite.users.test_users_http import CONFIG, Api, with_api


async def _submit(api: Api, token: str = "master", **extra: object) -> tuple[int, dict]:
    config = {**CONFIG, **extra.pop("config", {})}  # type: ignore[dict-item]
    body = {
        "config": config,
        "context": context_tarball({"train.py": "print(1)\n"}),
        "activate": False,
        **extra,
    }
    return await api.call("POST", "/experiments", body, token=token)


@with_api
async def test_the_default_workspace_and_project_hold_new_experiments(api: Api) -> None:
    status, answer = await api.call("GET", "/workspaces")
    assert status == 200
    [default] = answer["workspaces"]
    assert default["id"] == 1 and default["name"] == "Uncategorized" and default["immutable"]
    status, answer = await api.call("GET", "/workspaces/1/projects")
    [project] = answer["projects"]
    assert project["id"] == 1 and project["name"] == "Uncategorized"
    status, created = await _submit(api)
    assert status == 201, created
    experiment = created["experiment"]
    assert experiment["projectId"] == 1 and experiment["workspaceId"] == 1
    assert experiment["projectName"] == "Uncategorized"
    assert experiment["workspaceName"] == "Uncategorized"
    status, answer = await api.call("GET", "/projects/1")
    assert answer["project"]["numExperiments"] == 1
    # The default ones are kept as they are.
    status, answer = await api.call("DELETE", "/workspaces/1")
    assert status == 400 and "default workspace" in answer["message"]
    status, answer = await api.call("POST", "/projects/1/archive")
    assert status == 400 and "default project" in answer["message"]


@with_api
async def test_experiments_are_placed_by_project_id_or_config_names(api: Api) -> None:
    status, answer = await api.call("POST", "/workspaces", {"name": "nlp"})
    assert status == 200, answer
    workspace = answer["workspace"]
    assert workspace["name"] == "nlp" and workspace["numProjects"] == 0
    status, answer = await api.call(
        "POST", f"/workspaces/{workspace['id']}/projects", {"name": "bert", "description": "d"}
    )
    assert status == 200, answer
    project = answer["project"]
    assert project["workspaceId"] == workspace["id"] and project["key"] == "BERT"
    assert project["workspaceName"] == "nlp" and project["description"] == "d"

    status, by_id = await _submit(api, projectId=project["id"])
    assert status == 201, by_id
    assert by_id["experiment"]["projectId"] == project["id"]
    assert by_id["experiment"]["workspaceName"] == "nlp"
    status, by_name = await _submit(api, config={"workspace": "nlp", "project": "bert"})
    assert status == 201, by_name
    assert by_name["experiment"]["projectName"] == "bert"

    status, listing = await api.call("GET", f"/projects/{project['id']}/experiments")
    assert [e["id"] for e in listing["experiments"]] == [
        by_id["experiment"]["id"],
        by_name["experiment"]["id"],
    ]
    status, listing = await api.call("GET", f"/experiments?projectId={project['id']}")
    assert len(listing["experiments"]) == 2
    status, listing = await api.call("GET", f"/experiments?workspaceId={workspace['id']}")
    assert len(listing["experiments"]) == 2
    status, listing = await api.call("GET", "/experiments?projectId=1")
    assert listing["experiments"] == []


@with_api
async def test_unknown_names_are_400_naming_them_and_where_to_look(api: Api) -> None:
    status, answer = await _submit(api, config={"workspace": "nope", "project": "x"})
    assert status == 400
    assert "'nope'" in answer["message"] and "det workspace list" in answer["message"]
    await api.call("POST", "/workspaces", {"name": "cv"})
    status, answer = await _submit(api, config={"workspace": "cv", "project": "resnet"})
    assert status == 400
    assert "'resnet'" in answer["message"] and "det workspace list-projects" in answer["message"]
    status, answer = await _submit(api, projectId=999)
    assert status == 404 and "project 999" in answer["message"]
    status, listing = await api.call("GET", "/experiments")
    assert listing["experiments"] == []  # nothing was made


@with_api
async def test_names_are_unique_and_non_empty_things_are_not_deleted(api: Api) -> None:
    _, answer = await api.call("POST", "/workspaces", {"name": "team"})
    workspace_id = answer["workspace"]["id"]
    status, answer = await api.call("POST", "/workspaces", {"name": "team"})
    assert status == 409 and "'team' already exists" in answer["message"]
    _, answer = await api.call("POST", f"/workspaces/{workspace_id}/projects", {"name": "p"})
    project_id = answer["project"]["id"]
    status, answer = await api.call("POST", f"/workspaces/{workspace_id}/projects", {"name": "p"})
    assert status == 409 and "already has a project named 'p'" in answer["message"]
    status, created = await _submit(api, projectId=project_id)
    experiment_id = created["experiment"]["id"]

    status, answer = await api.call("DELETE", f"/workspaces/{workspace_id}")
    assert status == 409 and "1 project(s) ('p')" in answer["message"]
    status, answer = await api.call("DELETE", f"/projects/{project_id}")
    assert status == 409 and f"1 experiment(s) ({experiment_id})" in answer["message"]

    # Moved out, the project and then the workspace go.
    status, answer = await api.call(
        "POST", f"/experiments/{experiment_id}/move", {"destinationProjectId": 1}
    )
    assert status == 200, answer
    _, moved = await api.call("GET", f"/experiments/{experiment_id}")
    assert moved["experiment"]["projectId"] == 1
    status, answer = await api.call("DELETE", f"/projects/{project_id}")
    assert status == 200 and answer == {"completed": True}
    status, answer = await api.call("DELETE", f"/workspaces/{workspace_id}")
    assert status == 200 and answer == {"completed": True}
    status, answer = await api.call("GET", f"/workspaces/{workspace_id}")
    assert status == 404


@with_api
async def test_archived_places_take_no_new_experiments(api: Api) -> None:
    _, answer = await api.call("POST", "/workspaces", {"name": "old"})
    workspace_id = answer["workspace"]["id"]
    _, answer = await api.call("POST", f"/workspaces/{workspace_id}/projects", {"name": "p"})
    project_id = answer["project"]["id"]
    status, _ = await api.call("POST", f"/projects/{project_id}/archive")
    assert status == 200
    status, answer = await _submit(api, projectId=project_id)
    assert status == 400 and "is archived" in answer["message"]
    await api.call("POST", f"/projects/{project_id}/unarchive")
    await api.call("POST", f"/workspaces/{workspace_id}/archive")
    _, answer = await api.call("GET", f"/workspaces/{workspace_id}")
    assert answer["workspace"]["archived"] is True
    status, answer = await _submit(api, config={"workspace": "old", "project": "p"})
    assert status == 400 and "det workspace unarchive 'old'" in answer["message"]


@with_api
async def test_only_the_owner_or_an_admin_edits_a_workspace_or_project(api: Api) -> None:
    await api.user("spaces_alice")
    await api.user("spaces_bob")
    alice, bob = await api.login("spaces_alice"), await api.login("spaces_bob")
    status, answer = await api.call("POST", "/workspaces", {"name": "alices"}, token=alice)
    assert status == 200 and answer["workspace"]["username"] == "spaces_alice"
    workspace_id = answer["workspace"]["id"]
    # Anyone signed in may read it and add a project to it; the project is its creator's.
    status, _ = await api.call("GET", f"/workspaces/{workspace_id}", token=bob)
    assert status == 200
    status, answer = await api.call(
        "POST", f"/workspaces/{workspace_id}/projects", {"name": "bobs"}, token=bob
    )
    assert status == 200 and answer["project"]["username"] == "spaces_bob"
    project_id = answer["project"]["id"]

    for method, path, body in (
        ("PATCH", f"/workspaces/{workspace_id}", {"name": "mine"}),
        ("POST", f"/workspaces/{workspace_id}/archive", None),
        ("DELETE", f"/workspaces/{workspace_id}", None),
    ):
        status, answer = await api.call(method, path, body, token=bob)
        assert status == 403, (method, path, answer)
        assert "workspace 'alices' belongs to spaces_alice" in answer["message"]
    status, answer = await api.call("PATCH", f"/projects/{project_id}", {"name": "x"}, token=alice)
    assert status == 403 and "project 'bobs' belongs to spaces_bob" in answer["message"]
    _, answer = await api.call("GET", f"/workspaces/{workspace_id}")
    assert answer["workspace"]["name"] == "alices" and not answer["workspace"]["archived"]

    # Moving bob's experiment is bob's (or an admin's) to do.
    status, created = await _submit(api, token=bob)
    experiment_id = created["experiment"]["id"]
    status, answer = await api.call(
        "POST",
        f"/experiments/{experiment_id}/move",
        {"destinationProjectId": project_id},
        token=alice,
    )
    assert status == 403 and "only spaces_bob or an admin may move it" in answer["message"]
    status, _ = await api.call(
        "POST",
        f"/experiments/{experiment_id}/move",
        {"destinationProjectId": project_id},
        token=bob,
    )
    assert status == 200
    # The owner account (an admin) may edit alice's workspace.
    status, answer = await api.call("PATCH", f"/workspaces/{workspace_id}", {"name": "renamed"})
    assert status == 200 and answer["workspace"]["name"] == "renamed"

    # Lists filter by owner (Determined's `users` / `userIds`).
    await _submit(api, token=alice)
    _, listing = await api.call("GET", "/experiments?users=spaces_alice")
    assert [e["username"] for e in listing["experiments"]] == ["spaces_alice"]
    _, listing = await api.call("GET", "/experiments?users=spaces_alice&users=spaces_bob")
    assert len(listing["experiments"]) == 2


@with_api
async def test_a_fork_goes_into_its_parents_project_unless_told_otherwise(api: Api) -> None:
    _, answer = await api.call("POST", "/workspaces", {"name": "forks"})
    _, answer = await api.call(
        "POST", f"/workspaces/{answer['workspace']['id']}/projects", {"name": "p"}
    )
    project_id = answer["project"]["id"]
    _, parent = await _submit(api, projectId=project_id)
    parent_id = parent["experiment"]["id"]
    status, child = await api.call(
        "POST", "/experiments", {"config": CONFIG, "parent_id": parent_id, "activate": False}
    )
    assert status == 201, child
    assert child["experiment"]["projectId"] == project_id
    status, child = await api.call(
        "POST",
        "/experiments",
        {"config": CONFIG, "parent_id": parent_id, "activate": False, "projectId": 1},
    )
    assert status == 201 and child["experiment"]["projectId"] == 1


@with_api
async def test_a_kernel_run_goes_into_the_project_its_config_names(api: Api) -> None:
    """core_v2's `Config(workspace=, project=)`: the unmanaged run's experiment is placed."""
    _, answer = await api.call("POST", "/workspaces", {"name": "kernels"})
    await api.call("POST", f"/workspaces/{answer['workspace']['id']}/projects", {"name": "nb"})
    status, run = await api.call(
        "POST", "/unmanaged/runs", {"name": "in-a-kernel", "workspace": "kernels", "project": "nb"}
    )
    assert status == 200, run
    _, experiment = await api.call("GET", f"/experiments/{run['experiment_id']}")
    assert experiment["experiment"]["projectName"] == "nb"
    assert experiment["experiment"]["workspaceName"] == "kernels"
    status, answer = await api.call(
        "POST", "/unmanaged/runs", {"name": "lost", "workspace": "kernels", "project": "nope"}
    )
    assert status == 400 and "no project named 'nope'" in answer["message"]
