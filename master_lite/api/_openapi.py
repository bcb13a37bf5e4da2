"""The OpenAPI 3.0 document, generated from the route table so it cannot drift from it."""

from __future__ import annotations

from typing import Any

from master_lite.api._base import ApiHandlerMixin
from master_lite.api._declarations import Route
from master_lite.api._job_queue import JOB_SCHEMA
from master_lite.api._schema_types import (  # noqa: F401 - the route modules import them from here
    BOOLEAN,
    EMPTY,
    EXPERIMENT_STATES,
    INTEGER,
    NUMBER,
    NUMBER_OR_NON_FINITE,
    OBJECT,
    STRING,
    TIME,
    TRIAL_STATES,
    array,
    nullable,
    obj,
    ref,
)

API_VERSION = "1"


_METRIC_SUMMARY = nullable(obj(steps_completed=INTEGER, metrics=OBJECT, report_time=TIME))
_NOTEBOOK_ERROR = obj(
    ["cell_index", "line", "exception"],
    notebook=nullable(STRING),
    cell_id=nullable(STRING),
    cell_index={**INTEGER, "description": "0-based among all the notebook's cells"},
    line={**INTEGER, "description": "1-based within the cell"},
    exception={**STRING, "description": "e.g. 'ValueError: boom'"},
    execution_count=nullable(
        {**INTEGER, "description": "the cell's prompt number when submitted; null: not run"}
    ),
    code_number=nullable({**INTEGER, "description": "1-based among the notebook's code cells"}),
    first_line=nullable({**STRING, "description": "the cell's first line, as shown"}),
)

SCHEMAS: dict[str, dict] = {
    "Error": obj(["message"], message=STRING, errors=array(STRING)),
    "Job": JOB_SCHEMA,  # Determined's jobv1.Job (GET /job-queues)
    "Experiment": obj(
        ["id", "state"],
        id=INTEGER,
        name=STRING,
        description=STRING,
        notes={**STRING, "description": "the user's notes (empty until set)"},
        labels=array(STRING),
        state={"type": "string", "enum": EXPERIMENT_STATES},
        archived=BOOLEAN,
        progress={"type": "number", "minimum": 0, "maximum": 1},
        start_time=TIME,
        end_time=nullable(TIME),
        searcher=obj(name=STRING, metric=STRING, smaller_is_better=BOOLEAN),
        num_trials=INTEGER,
        best_validation=nullable(NUMBER),
        context_hash=nullable(STRING),
        notebook=nullable(OBJECT),
        parent_id=nullable(INTEGER),
        run_state=nullable(
            {
                "type": "string",
                "enum": ["QUEUED", "RUNNING", "STOPPING"],
                "description": (
                    "of an ACTIVE experiment, what Determined (0.2x+) reports in place of ACTIVE: "
                    "RUNNING while one of its trials holds slots, else QUEUED; STOPPING while a "
                    "PAUSED experiment (or one the master is stopping) still has a run asked to "
                    "stop that has not exited (the views show PAUSING); null otherwise"
                ),
            }
        ),
        wait_reason=nullable(
            {
                "type": "string",
                "description": (
                    "why a QUEUED experiment's first waiting trial waits, in words "
                    "(docs/scheduling.md); null otherwise"
                ),
            }
        ),
        config={**OBJECT, "description": "the expanded config (GET /experiments/{id} only)"},
        userId={**INTEGER, "description": "the owner's user id (1: the master's owner account)"},
        username=nullable({**STRING, "description": "the owner's username (docs/team.md)"}),
        projectId={**INTEGER, "description": "its project (1: the default, Uncategorized)"},
        projectName=nullable(STRING),
        workspaceId=nullable(INTEGER),
        workspaceName=nullable(STRING),
    ),
    "Workspace": obj(
        ["id", "name", "archived", "userId"],
        id=INTEGER,
        name=STRING,
        archived=BOOLEAN,
        username=nullable({**STRING, "description": "its owner (who created it)"}),
        userId=INTEGER,
        immutable={**BOOLEAN, "description": "the default workspace (id 1): kept as it is"},
        numProjects=INTEGER,
        numExperiments=INTEGER,
        pinned=BOOLEAN,
        state=STRING,
        defaultComputePool=nullable(STRING),  # null: the master's default pool
        defaultAuxPool=nullable(STRING),
        resourceQuota=nullable(INTEGER),  # its slot quota, null: no limit (docs/scheduling.md)
    ),
    "Project": obj(
        ["id", "name", "workspaceId", "archived", "userId"],
        id=INTEGER,
        name=STRING,
        key=STRING,
        description=STRING,
        workspaceId=INTEGER,
        workspaceName=nullable(STRING),
        archived=BOOLEAN,
        username=nullable({**STRING, "description": "its owner (who created it)"}),
        userId=INTEGER,
        immutable={**BOOLEAN, "description": "the default project (id 1): kept as it is"},
        numExperiments=INTEGER,
        numActiveExperiments=INTEGER,
    ),
    "User": obj(
        ["id", "username", "admin", "active"],
        id=INTEGER,
        username=STRING,
        displayName=STRING,
        admin=BOOLEAN,
        active=BOOLEAN,
        remote={**BOOLEAN, "description": "always false: no remote (SSO) users"},
        modifiedAt=nullable(TIME),
    ),
    "Trial": obj(
        ["id", "experiment_id", "state"],
        id=INTEGER,
        experiment_id=INTEGER,
        request_id=INTEGER,
        state={"type": "string", "enum": TRIAL_STATES},
        hparams=OBJECT,
        seed=INTEGER,
        restarts=INTEGER,
        run_id=INTEGER,
        steps_completed=INTEGER,
        progress=NUMBER,
        runner_state=STRING,
        start_time=TIME,
        end_time=nullable(TIME),
        exit_code=nullable(INTEGER),
        exit_summary=nullable(
            {
                **STRING,
                "description": (
                    "the last run's exit in words: 'exited with code N', or 'killed by signal NAME (N): "
                    "why' (killed by the user, preempted, possibly out of memory, reason unknown); "
                    "null after a clean exit"
                ),
            }
        ),
        kernel_kept={
            "type": "boolean",
            "description": (
                "a failed kernel trial's kernel is still kept for post-mortem "
                "(environment.kernel.keep_alive): Debug in console / det trial attach work until "
                "it is released (a `trial` event tells when)"
            ),
        },
        run_state=nullable(
            {
                "type": "string",
                "enum": ["QUEUED", "RUNNING", "STOPPING"],
                "description": (
                    "STOPPING once the trial's run was asked to exit (pause, master stopping, "
                    "cancel) until it has, whatever the trial's state (a paused trial reads "
                    "PAUSED at once); else of an ACTIVE trial: QUEUED while it waits for slots, "
                    "RUNNING while an allocation holds them; null otherwise"
                ),
            }
        ),
        stop_reason=nullable(
            {
                "type": "string",
                "enum": [
                    "stop",
                    "pause",
                    "master-stop",
                    "cancel",
                    "kill-trial",
                    "kill",
                    "rebalance",
                ],
                "description": (
                    "why a STOPPING run was asked to exit (pause: a user paused the experiment; "
                    "master-stop: the master is shutting down; rebalance: the scheduler gave "
                    "its slots to another job, it waits again and resumes from its latest "
                    "checkpoint); null unless run_state is STOPPING"
                ),
            }
        ),
        wait_reason=nullable(
            {
                "type": "string",
                "description": (
                    "why a QUEUED trial waits, in words (e.g. 'waiting: alice is at their "
                    "4-slot quota'; docs/scheduling.md); null unless it waits for slots"
                ),
            }
        ),
        notebook_error=nullable(
            {
                **_NOTEBOOK_ERROR,
                "description": (
                    "where an exported notebook's code failed in the last run (from its "
                    "DET_NOTEBOOK_ERROR log line); null otherwise"
                ),
            }
        ),
        allocation_id=nullable(STRING),
        slot_ids=array(INTEGER),
        latest_checkpoint=nullable(STRING),
        latest_training=_METRIC_SUMMARY,
        latest_validation=_METRIC_SUMMARY,
        best_validation=_METRIC_SUMMARY,
        searcher_metric=nullable(NUMBER_OR_NON_FINITE),
    ),
    "Metric": obj(
        ["id", "trial_id", "group", "steps_completed", "metrics"],
        id=INTEGER,
        trial_id=INTEGER,
        trial_run_id=INTEGER,
        group=STRING,
        steps_completed=INTEGER,
        metrics=OBJECT,
        report_time=TIME,
    ),
    "Log": obj(
        ["id", "trial_id", "line"],
        id=INTEGER,
        trial_id=INTEGER,
        rank=nullable(INTEGER),
        stream={"type": "string", "enum": ["stdout", "stderr", "master"]},
        time=TIME,
        line=STRING,
    ),
    "Checkpoint": obj(
        ["uuid", "trial_id", "experiment_id", "state"],
        uuid=STRING,
        trial_id=INTEGER,
        experiment_id=INTEGER,
        allocation_id=nullable(STRING),
        steps_completed=INTEGER,
        metadata=OBJECT,
        resources={"type": "object", "additionalProperties": INTEGER},
        state={"type": "string", "enum": ["COMPLETED", "DELETED"]},
        report_time=TIME,
        path=STRING,
        validation_metrics=nullable(OBJECT),
    ),
    "TensorBoard": obj(
        ["id", "state", "experimentIds", "trialIds", "serviceAddress"],
        id=STRING,
        state={"type": "string", "enum": ["STATE_STARTING", "STATE_RUNNING", "STATE_TERMINATED"]},
        experimentIds=array(INTEGER),
        trialIds={**array(INTEGER), "description": "every trial shown (an experiment's too)"},
        serviceAddress={
            **STRING,
            "description": "where to open it: Jupyter's proxy inside JupyterLab, else its "
            "loopback address",
        },
        port={**INTEGER, "description": "its loopback port on the master's machine"},
        registeredTime=TIME,
        error=nullable({**STRING, "description": "why it stopped on its own"}),
        userId={**INTEGER, "description": "who launched it (only they or an admin may kill it)"},
        username=nullable(STRING),
    ),
    "Model": obj(
        ["id", "name"],
        id=INTEGER,
        name=STRING,
        description=STRING,
        notes=STRING,
        metadata=OBJECT,
        labels=array(STRING),
        archived=BOOLEAN,
        creation_time=TIME,
        last_updated_time=TIME,
        num_versions=INTEGER,
        userId={**INTEGER, "description": "the owner's user id"},
        username=nullable({**STRING, "description": "the owner's username"}),
    ),
    "ModelVersion": obj(
        ["id", "model_id", "version", "checkpoint_uuid"],
        id=INTEGER,
        model_id=INTEGER,
        model_name=STRING,
        version={**INTEGER, "description": "1, 2, ... within the model"},
        checkpoint_uuid=STRING,
        checkpoint=nullable(ref("Checkpoint")),  # null only when its record is gone
        name=STRING,
        comment=STRING,
        notes=STRING,
        metadata=OBJECT,
        labels=array(STRING),
        creation_time=TIME,
        last_updated_time=TIME,
    ),
    "Slot": obj(
        ["id", "type"],
        id=INTEGER,
        type={"type": "string", "enum": ["cpu", "gpu"]},
        gpu=nullable(OBJECT),
        allocation_id=nullable(STRING),
        trial_id=nullable(INTEGER),
        pool=nullable(STRING),
    ),
}

_ERROR_DESCRIPTIONS = {
    400: "bad input",
    401: "missing or invalid token",
    403: "token not allowed here",
    404: "not found",
    409: "not allowed in the current state",
    413: "too large",
    429: "too many failed sign-ins: try again after Retry-After seconds",
    503: "something the request needs is not installed beside the master",
    507: "the store could not be written (disk full or read-only root dir)",
}


def _operation_id(method: str, path: str) -> str:
    words = [part.strip("{}") for part in path.strip("/").replace(".", "_").split("/")]
    return method + "_" + "_".join(words)


def build_document(routes: list[Route] | tuple[Route, ...], prefix: str = "") -> dict:
    """The OpenAPI 3.0 document of `routes` served under `prefix`."""
    paths: dict[str, dict] = {}
    for route in routes:
        path_item: dict[str, Any] = {}
        path_parameters = [
            {
                "name": p.name,
                "in": "path",
                "required": True,
                "schema": p.schema,
                "description": p.description,
            }
            for p in route.params
        ]
        if path_parameters:
            path_item["parameters"] = path_parameters
        for method, operation in route.operations.items():
            entry: dict[str, Any] = {
                "operationId": _operation_id(method, route.path),
                "summary": operation.summary,
                "x-trial-scope": operation.trial_scope.value if operation.trial_scope else None,
            }
            if operation.description:
                entry["description"] = operation.description
            if not operation.auth:
                entry["security"] = []
            parameters = []
            for param in operation.query:
                schema: dict[str, Any] = {"type": "string" if param.kind == "csv" else param.kind}
                if param.enum and param.kind != "csv":
                    schema["enum"] = list(param.enum)
                if param.default is not None:
                    schema["default"] = param.default
                for bound in ("minimum", "maximum"):
                    if getattr(param, bound) is not None:
                        schema[bound] = getattr(param, bound)
                description = param.description
                if param.kind == "csv" and param.enum:
                    description += f" (comma-separated: {', '.join(param.enum)})"
                parameters.append(
                    {
                        "name": param.name,
                        "in": "query",
                        "required": False,
                        "schema": schema,
                        "description": description,
                    }
                )
            if parameters:
                entry["parameters"] = parameters
            if operation.request is not None:
                entry["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": operation.request}},
                }
            if operation.content_type == "application/json":
                content = {"application/json": {"schema": operation.response}}
            else:
                content = {operation.content_type: {"schema": operation.response}}
            responses: dict[str, Any] = {
                str(operation.status): {"description": operation.summary, "content": content}
            }
            for status, text in _ERROR_DESCRIPTIONS.items():
                if status == 401 and not operation.auth and not operation.signs_in:
                    continue
                if status == 403 and operation.trial_scope is None and not operation.auth:
                    continue
                if status == 429 and not operation.signs_in:
                    continue  # only sign-ins are limited
                responses[str(status)] = {
                    "description": text,
                    "content": {"application/json": {"schema": ref("Error")}},
                }
            entry["responses"] = responses
            path_item[method] = entry
        paths["/api/v1" + route.path] = path_item
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "master_lite REST API",
            "version": API_VERSION,
            "description": "Determined-compatible master API of jupyter-determined. "
            "x-trial-scope names what a trial token may touch "
            "(null: user token only).",
        },
        "servers": [{"url": prefix or "/"}],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the master token (master.json) or a trial's DET_SESSION_TOKEN; "
                    "?token= is accepted too, for EventSource",
                }
            },
        },
        "security": [{"bearer": []}],
    }


class OpenAPIHandler(ApiHandlerMixin):
    async def get(self) -> None:
        self.send_json(build_document(self.api_routes, self.api_prefix))
