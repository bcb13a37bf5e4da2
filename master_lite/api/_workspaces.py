"""Workspace and project endpoints (Determined's `/api/v1/workspaces*`, `/api/v1/projects*`,
`POST /api/v1/experiments/{id}/move`; docs/team.md, "Workspaces and projects")."""

from __future__ import annotations

from master_lite._core._auth import UserPrincipal
from master_lite.api._base import ApiHandlerMixin
from master_lite.api._declarations import Listing, Operation, Owner, Param, PathParam, Route
from master_lite.api._openapi import (
    BOOLEAN,
    EMPTY,
    INTEGER,
    NUMBER,
    OBJECT,
    STRING,
    array,
    nullable,
    obj,
    ref,
)
from master_lite.api._reads import check_readable
from master_lite.api._schemas import EXPERIMENT_ID

WORKSPACE_ID = PathParam("workspace_id", r"[0-9]+", INTEGER, int, "workspace id")
PROJECT_ID = PathParam("project_id", r"[0-9]+", INTEGER, int, "project id")
PLACE_ACTION = PathParam(
    "action",
    "archive|unarchive",
    {**STRING, "enum": ["archive", "unarchive"]},
    str,
    "archive or unarchive",
)
PLACE_NAME = {**STRING, "minLength": 1, "maxLength": 128}
PLACE_DESCRIPTION = {**STRING, "maxLength": 10_000}
PROJECT_KEY = {**STRING, "minLength": 1, "maxLength": 5, "description": "1 to 5 letters/digits"}
WORKSPACE_ANSWER = obj(["workspace"], workspace=ref("Workspace"))
PROJECT_ANSWER = obj(["project"], project=ref("Project"))
DELETED = obj(["completed"], completed={**BOOLEAN, "description": "always true: done at once"})
PAGINATION = obj(offset=INTEGER, limit=INTEGER, total=INTEGER)
NAME_FILTER = Param("name", "string", "only the one with exactly this name")
ARCHIVED_FILTER = Param("archived", "boolean", "only (un)archived ones")
EMPTY_409 = "409 when it is not empty (the message names what is in it); 400 for the default"


def _paged(key: str, items: list[dict]) -> dict:
    return {key: items, "pagination": {"offset": 0, "limit": len(items), "total": len(items)}}


class WorkspacesHandler(ApiHandlerMixin):
    async def get(self) -> None:
        workspaces = self.master.workspaces.list_workspaces(
            name=self.args["name"], archived=self.args["archived"]
        )
        self.send_json(_paged("workspaces", workspaces))

    async def post(self) -> None:
        body = self.body
        if body.get("clusterQuotaPairs") and isinstance(self.principal, UserPrincipal):
            # A quota: admins only (as Determined's CanSetResourceQuotas).
            self.master.users.check_may_act(self.principal, "admin", None, "set resource quotas")
        self.send_json(
            self.master.workspaces.create_workspace(
                body["name"],
                owner_id=self.owner_id(),
                default_compute_pool=body.get("defaultComputePool"),
                cluster_quota_pairs=body.get("clusterQuotaPairs"),
            )
        )


class WorkspaceHandler(ApiHandlerMixin):
    async def get(self, workspace_id: int) -> None:
        self.send_json(self.master.workspaces.get_workspace(workspace_id))

    async def patch(self, workspace_id: int) -> None:
        self.send_json(self.master.workspaces.patch_workspace(workspace_id, self.body))

    async def delete(self, workspace_id: int) -> None:
        self.send_json(self.master.workspaces.delete_workspace(workspace_id))


class WorkspaceQuotaHandler(ApiHandlerMixin):
    async def post(self, workspace_id: int) -> None:
        self.send_json(
            self.master.workspaces.set_resource_quota(
                workspace_id, self.body.get("clusterQuotaPairs")
            )
        )


class WorkspaceQuotasHandler(ApiHandlerMixin):
    async def get(self, workspace_id: int) -> None:
        self.send_json(self.master.workspaces.resource_quotas(workspace_id))


class WorkspaceActionHandler(ApiHandlerMixin):
    async def post(self, workspace_id: int, action: str) -> None:
        self.send_json(self.master.workspaces.archive_workspace(workspace_id, action == "archive"))


class WorkspaceProjectsHandler(ApiHandlerMixin):
    async def get(self, workspace_id: int) -> None:
        projects = self.master.workspaces.list_projects(
            workspace_id, name=self.args["name"], archived=self.args["archived"]
        )
        self.send_json(_paged("projects", projects))

    async def post(self, workspace_id: int) -> None:
        body = self.body
        self.send_json(
            self.master.workspaces.create_project(
                workspace_id,
                body["name"],
                owner_id=self.owner_id(),
                description=body.get("description"),
                key=body.get("key"),
            )
        )


class ProjectHandler(ApiHandlerMixin):
    async def get(self, project_id: int) -> None:
        self.send_json(self.master.workspaces.get_project(project_id))

    async def patch(self, project_id: int) -> None:
        self.send_json(self.master.workspaces.patch_project(project_id, self.body))

    async def delete(self, project_id: int) -> None:
        self.send_json(self.master.workspaces.delete_project(project_id))


class ProjectActionHandler(ApiHandlerMixin):
    async def post(self, project_id: int, action: str) -> None:
        self.send_json(self.master.workspaces.archive_project(project_id, action == "archive"))


class ProjectExperimentsHandler(ApiHandlerMixin):
    async def get(self, project_id: int) -> None:
        self.master.workspaces.get_project(project_id)  # 404 for no such project
        await self.send_read(
            "experiments",
            self.master.views.list_experiments,
            project_id=project_id,
            archived=self.args["archived"],
        )


class ExperimentMoveHandler(ApiHandlerMixin):
    async def post(self, experiment_id: int) -> None:
        # read_access "own": only into a project the user may read (else 404).
        check_readable(self.master, self.principal, "project", [self.body["destinationProjectId"]])
        self.send_json(
            self.master.workspaces.move_experiment(experiment_id, self.body["destinationProjectId"])
        )


_OWNER_OR_ADMIN = "its owner or an admin (docs/team.md)"
POOL_NAME = {**STRING, "description": "a resource pool's name ('': the master's default)"}
QUOTA_PAIRS = {
    **OBJECT,
    "description": "Determined's {cluster name: slots}: this master is one cluster, so one "
    'entry, e.g. {"": 4}; null as the value removes the quota (our addition)',
    "additionalProperties": nullable({**INTEGER, "minimum": 0}),
}

WORKSPACE_ROUTES: tuple[Route, ...] = (
    Route(
        "/workspaces",
        WorkspacesHandler,
        {
            "get": Operation(
                "Every workspace, by id",
                obj(["workspaces"], workspaces=array(ref("Workspace")), pagination=PAGINATION),
                reads=Listing("workspaces", "workspace"),
                query=(NAME_FILTER, ARCHIVED_FILTER),
            ),
            "post": Operation(
                "Create a workspace (anyone signed in; the creator owns it)",
                WORKSPACE_ANSWER,
                request=obj(
                    ["name"],
                    name=PLACE_NAME,
                    defaultComputePool=nullable(POOL_NAME),
                    clusterQuotaPairs=QUOTA_PAIRS,
                ),
                description="409 when the name is taken; 400 for an unknown pool; a quota "
                "(clusterQuotaPairs) needs an admin (403)",
            ),
        },
    ),
    Route(
        "/workspaces/{workspace_id}",
        WorkspaceHandler,
        {
            "get": Operation("A workspace", WORKSPACE_ANSWER),
            "patch": Operation(
                "Rename a workspace, set its default compute pool (" + _OWNER_OR_ADMIN + ")",
                WORKSPACE_ANSWER,
                request=obj(name=PLACE_NAME, defaultComputeResourcePool=nullable(POOL_NAME)),
                description="400 for an unknown pool",
                owner=Owner.WORKSPACE,
                verb="edit",
            ),
            "delete": Operation(
                "Delete an empty workspace (" + _OWNER_OR_ADMIN + ")",
                DELETED,
                owner=Owner.WORKSPACE,
                verb="delete",
                description=EMPTY_409,
            ),
        },
        (WORKSPACE_ID,),
    ),
    Route(
        "/workspaces/{workspace_id}/projects",
        WorkspaceProjectsHandler,
        {
            "get": Operation(
                "The workspace's projects, by id",
                obj(["projects"], projects=array(ref("Project")), pagination=PAGINATION),
                reads=Listing("projects", "project"),
                query=(NAME_FILTER, ARCHIVED_FILTER),
            ),
            "post": Operation(
                "Create a project in the workspace (anyone signed in; the creator owns it)",
                PROJECT_ANSWER,
                request=obj(
                    ["name"],
                    name=PLACE_NAME,
                    description=PLACE_DESCRIPTION,
                    key=PROJECT_KEY,
                    workspaceId={**INTEGER, "description": "ignored: the path names it"},
                ),
                description="409 when the workspace has a project of that name",
            ),
        },
        (WORKSPACE_ID,),
    ),
    Route(
        "/workspaces/{workspace_id}/set-resource-quota",
        WorkspaceQuotaHandler,
        {
            "post": Operation(
                "Set or remove a workspace's slot quota (admins only; docs/scheduling.md)",
                EMPTY,
                request=obj(
                    ["clusterQuotaPairs"],
                    clusterQuotaPairs=QUOTA_PAIRS,
                    id={**INTEGER, "description": "ignored: the path names it"},
                ),
                owner=Owner.ADMIN,
                verb="set the resource quota of",
            )
        },
        (WORKSPACE_ID,),
    ),
    Route(
        "/workspaces/{workspace_id}/get-k8s-resource-quotas",
        WorkspaceQuotasHandler,
        {
            "get": Operation(
                'A workspace\'s slot quota, {resourceQuotas: {"": slots}} (empty: no limit)',
                obj(["resourceQuotas"], resourceQuotas={**OBJECT, "additionalProperties": NUMBER}),
            )
        },
        (WORKSPACE_ID,),
    ),
    Route(
        "/workspaces/{workspace_id}/{action}",
        WorkspaceActionHandler,
        {
            "post": Operation(
                "Archive or unarchive a workspace (" + _OWNER_OR_ADMIN + ")",
                EMPTY,
                owner=Owner.WORKSPACE,
            )
        },
        (WORKSPACE_ID, PLACE_ACTION),
    ),
    Route(
        "/projects/{project_id}",
        ProjectHandler,
        {
            "get": Operation("A project", PROJECT_ANSWER),
            "patch": Operation(
                "Change a project's name, description or key (" + _OWNER_OR_ADMIN + ")",
                PROJECT_ANSWER,
                request=obj(name=PLACE_NAME, description=PLACE_DESCRIPTION, key=PROJECT_KEY),
                owner=Owner.PROJECT,
                verb="edit",
            ),
            "delete": Operation(
                "Delete an empty project (" + _OWNER_OR_ADMIN + ")",
                DELETED,
                owner=Owner.PROJECT,
                verb="delete",
                description=EMPTY_409,
            ),
        },
        (PROJECT_ID,),
    ),
    Route(
        "/projects/{project_id}/experiments",
        ProjectExperimentsHandler,
        {
            "get": Operation(
                "The project's experiments, by id",
                obj(["experiments"], experiments=array(ref("Experiment"))),
                reads=Listing("experiments", "experiment"),
                query=(ARCHIVED_FILTER,),
            )
        },
        (PROJECT_ID,),
    ),
    Route(
        "/projects/{project_id}/{action}",
        ProjectActionHandler,
        {
            "post": Operation(
                "Archive or unarchive a project (" + _OWNER_OR_ADMIN + ")",
                EMPTY,
                owner=Owner.PROJECT,
            )
        },
        (PROJECT_ID, PLACE_ACTION),
    ),
    Route(
        "/experiments/{experiment_id}/move",
        ExperimentMoveHandler,
        {
            "post": Operation(
                "Move an experiment into another project (the experiment's owner or an admin)",
                EMPTY,
                request=obj(
                    ["destinationProjectId"],
                    destinationProjectId=INTEGER,
                    experimentId={**INTEGER, "description": "ignored: the path names it"},
                ),
                owner=Owner.EXPERIMENT,
                verb="move",
            )
        },
        (EXPERIMENT_ID,),
    ),
)

__all__ = ["WORKSPACE_ROUTES"]
