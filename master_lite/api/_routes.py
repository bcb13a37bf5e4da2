"""The route table: every endpoint, its methods, parameters, schemas and trial scope.

This is the one place that says what a trial token may call (`trial_scope`); handlers, auth
and the OpenAPI document all read it from here.
"""

from __future__ import annotations

from master_lite._core._events import EVENT_TYPES
from master_lite.api import _allocations, _checkpoints, _events, _experiments, _openapi
from master_lite.api._declarations import Listing, Operation, Owner, Param, Reads, Route, TrialScope
from master_lite.api._job_queue import JOB_QUEUE_ROUTES
from master_lite.api._model_routes import MODEL_ROUTES
from master_lite.api._openapi import (
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
from master_lite.api._schemas import (
    ACTION,
    AFTER_ID,
    CHECKPOINT_ANSWER,
    CHECKPOINT_BODY,
    CHECKPOINT_UUID,
    CREATE_EXPERIMENT_BODY,
    DESCRIPTION,
    EXPERIMENT_ANSWER,
    EXPERIMENT_ID,
    GZIP,
    LABELS,
    LIMIT,
    MAX_DATAPOINTS,
    METRICS_ANSWER,
    NAME,
    NOTES,
    OFFSET,
    ORDER_BY,
    SLOTS,
    TRIAL_IDS,
    TRIALS_LIMIT,
)
from master_lite.api._tensorboards import TENSORBOARD_ROUTES
from master_lite.api._trial_routes import TRIAL_ROUTES
from master_lite.api._unmanaged import UNMANAGED_ROUTES
from master_lite.api._users import USER_ROUTES
from master_lite.api._workspaces import WORKSPACE_ROUTES

ROUTES: tuple[Route, ...] = (
    Route(
        "/master",
        _allocations.MasterInfoHandler,
        {
            "get": Operation(
                "What this master is",
                obj(version=STRING, root_dir=STRING, cluster_id=STRING, cluster=OBJECT),
                description="cluster (resource_manager ray only): the Ray connection's state "
                "(connecting, connected, waiting), message and nodes",
                reads=Reads.ANYONE,
            )
        },
    ),
    Route(
        "/openapi.json",
        _openapi.OpenAPIHandler,
        {"get": Operation("This document", OBJECT, auth=False, reads=Reads.ANYONE)},
    ),
    Route(
        "/experiments",
        _experiments.ExperimentsHandler,
        {
            "get": Operation(
                "List experiments, ordered by id",
                obj(["experiments"], experiments=array(ref("Experiment"))),
                reads=Listing("experiments", "experiment"),
                query=(
                    Param("state", "string", "only experiments in this state"),
                    Param("name", "string", "only names containing this"),
                    Param("archived", "boolean", "only (un)archived experiments"),
                    Param("projectId", "integer", "only experiments in this project"),
                    Param("workspaceId", "integer", "only experiments in this workspace"),
                    Param("users", "csv", "only experiments of these owners (usernames)"),
                    Param("userIds", "csv", "only experiments of these owners (user ids)"),
                ),
            ),
            "post": Operation(
                "Create an experiment",
                EXPERIMENT_ANSWER,
                status=201,
                request=CREATE_EXPERIMENT_BODY,
                # It runs the uploaded code on this machine, as a kernel would.
                auth_action="execute",
                description="400 lists every config error with its path; 413 when "
                "the context is larger than context_size_limit",
            ),
        },
    ),
    Route(
        "/experiments/{experiment_id}",
        _experiments.ExperimentHandler,
        {
            "get": Operation(
                "An experiment (with its expanded config) and its trials",
                obj(
                    ["experiment", "trials"],
                    experiment=ref("Experiment"),
                    trials=array(ref("Trial")),
                ),
            ),
            "patch": Operation(
                "Change an experiment's name, description, notes, labels or scheduling "
                "resources (those given)",
                EXPERIMENT_ANSWER,
                request=obj(
                    name=NAME,
                    description=DESCRIPTION,
                    notes=NOTES,
                    labels={**LABELS, "description": "all its labels"},
                    resources={
                        **obj(
                            priority={**INTEGER, "minimum": 1, "maximum": 99},
                            max_slots=nullable(SLOTS),
                            weight={**NUMBER, "minimum": 0},
                        ),
                        "description": "fields of the config's resources: priority (smaller "
                        "first) and max_slots (null: no limit) apply to trials that wait; "
                        "weight is kept only",
                    },
                ),
                description="any state; labels replace the old ones (repeats dropped)",
                owner=Owner.EXPERIMENT,
            ),
            "delete": Operation(
                "Delete a finished experiment: its trials, metrics, logs and checkpoints "
                "(their files too)",
                obj(
                    ["id", "deleted_checkpoints", "deleted_trials"],
                    id=INTEGER,
                    deleted_checkpoints={
                        **INTEGER,
                        "description": "COMPLETED checkpoints whose files were deleted",
                    },
                    deleted_trials=INTEGER,
                ),
                description="409 while it is not finished, or while a checkpoint of it must "
                "be kept (a live trial resumes or warm-starts from it); nothing is deleted then",
                owner=Owner.EXPERIMENT,
            ),
        },
        (EXPERIMENT_ID,),
    ),
    Route(
        "/experiments/{experiment_id}/trials",
        _experiments.ExperimentTrialsHandler,
        {
            "get": Operation(
                "The trials of an experiment, with their latest and best metrics",
                obj(
                    ["trials", "total"],
                    trials=array(ref("Trial")),
                    total={**INTEGER, "description": "trials in the experiment"},
                ),
                query=(TRIALS_LIMIT, OFFSET, ORDER_BY),
            )
        },
        (EXPERIMENT_ID,),
    ),
    Route(
        "/experiments/{experiment_id}/checkpoints",
        _experiments.ExperimentCheckpointsHandler,
        {
            "get": Operation(
                "The checkpoints of an experiment",
                obj(["checkpoints"], checkpoints=array(ref("Checkpoint"))),
                query=(
                    Param(
                        "state",
                        "string",
                        "only checkpoints in this state",
                        enum=("COMPLETED", "DELETED"),
                    ),
                ),
            )
        },
        (EXPERIMENT_ID,),
    ),
    Route(
        "/experiments/{experiment_id}/logs",
        _experiments.ExperimentLogsHandler,
        {
            "get": Operation(
                "Log lines of every trial of an experiment (each with its trial_id), ascending id",
                obj(["logs"], logs=array(ref("Log"))),
                query=(
                    Param("search", "string", "only lines containing this text (any case)"),
                    AFTER_ID,
                    LIMIT,
                    Param("tail", "integer", "only the last N lines", minimum=0),
                    Param(
                        "stream", "string", "only this stream", enum=("stdout", "stderr", "master")
                    ),
                ),
            )
        },
        (EXPERIMENT_ID,),
    ),
    Route(
        "/experiments/{experiment_id}/context",
        _experiments.ExperimentContextHandler,
        {
            "get": Operation(
                "The stored context (tar.gz)",
                GZIP,
                content_type="application/gzip",
                owner=Owner.EXPERIMENT,
                verb="download the code of",
            )
        },
        (EXPERIMENT_ID,),
    ),
    Route(
        "/experiments/{experiment_id}/metrics",
        _experiments.ExperimentMetricsHandler,
        {
            "get": Operation(
                "Metric reports of every trial of an experiment",
                METRICS_ANSWER,
                query=(
                    Param("group", "string", "only this group, e.g. validation"),
                    AFTER_ID,
                    LIMIT,
                    TRIAL_IDS,
                    MAX_DATAPOINTS,
                ),
            )
        },
        (EXPERIMENT_ID,),
    ),
    Route(
        "/experiments/{experiment_id}/searcher/best_searcher_validation_metric",
        _experiments.BestValidationHandler,
        {
            "get": Operation(
                "The best searcher metric so far (404 when none)",
                obj(["metric"], metric=NUMBER),
                trial_scope=TrialScope.EXPERIMENT,
            )
        },
        (EXPERIMENT_ID,),
    ),
    Route(
        "/experiments/{experiment_id}/{action}",
        _experiments.ExperimentActionHandler,
        {
            "post": Operation(
                "Pause, activate, cancel, kill, archive or unarchive an experiment "
                "(409 when its state does not allow it)",
                EXPERIMENT_ANSWER,
                owner=Owner.EXPERIMENT,
            )
        },
        (EXPERIMENT_ID, ACTION),
    ),
    *TRIAL_ROUTES,
    *UNMANAGED_ROUTES,
    Route(
        "/checkpoints",
        _checkpoints.CheckpointsHandler,
        {
            "post": Operation(
                "Register a checkpoint written to checkpoint storage",
                CHECKPOINT_ANSWER,
                request=CHECKPOINT_BODY,
                trial_scope=TrialScope.CHECKPOINT_REPORT,
                description="400 when uuid is not a UUID; 409 when another trial reported that "
                "uuid (a record stays with the trial that first reported it)",
            ),
            "patch": Operation(
                "Mark checkpoints deleted",
                EMPTY,
                trial_scope=TrialScope.CHECKPOINT_DELETE,
                owner=Owner.CHECKPOINTS,
                verb="delete",
                request=obj(
                    ["checkpoints"], checkpoints=array(obj(["uuid"], uuid=STRING, resources=OBJECT))
                ),
            ),
        },
    ),
    Route(
        "/checkpoints/{uuid}",
        _checkpoints.CheckpointHandler,
        {
            "get": Operation(
                "A checkpoint", CHECKPOINT_ANSWER, trial_scope=TrialScope.CHECKPOINT_READ
            ),
            "patch": Operation(
                "Replace a checkpoint's metadata",
                CHECKPOINT_ANSWER,
                request=obj(["metadata"], metadata=OBJECT),
                description="the master's record only: the files in storage keep their "
                "metadata.json",
                owner=Owner.CHECKPOINT,
            ),
            "delete": Operation(
                "Delete a checkpoint's files; it stays listed as DELETED",
                CHECKPOINT_ANSWER,
                description="409 when it is not COMPLETED, a trial that is not finished "
                "resumes or warm-starts from it, or a model version names it",
                owner=Owner.CHECKPOINT,
            ),
        },
        (CHECKPOINT_UUID,),
    ),
    Route(
        "/checkpoints/{uuid}/snippet",
        _checkpoints.CheckpointSnippetHandler,
        {
            "get": Operation(
                "The notebook cell that downloads and loads the checkpoint (Use in notebook)",
                obj(
                    ["kind", "code"],
                    kind={
                        **STRING,
                        "enum": ["pytorch", "keras", "estimator", "core"],
                        "description": "the loader, from the metadata's framework and format",
                    },
                    code={**STRING, "description": "Python source of the cell"},
                ),
                description="404 unless the checkpoint is COMPLETED",
            )
        },
        (CHECKPOINT_UUID,),
    ),
    Route(
        "/checkpoints/{uuid}/download",
        _checkpoints.CheckpointDownloadHandler,
        {
            "get": Operation(
                "The checkpoint directory as tar.gz",
                GZIP,
                content_type="application/gzip",
                description="403 when its recorded path is not a uuid-named directory under "
                "the master's checkpoint storage roots",
                owner=Owner.CHECKPOINT,
                verb="download",
            )
        },
        (CHECKPOINT_UUID,),
    ),
    *TENSORBOARD_ROUTES,
    Route(
        "/checkpoints/{uuid}/model_versions",
        _checkpoints.CheckpointModelVersionsHandler,
        {
            "get": Operation(
                "The model versions that name a checkpoint (it is kept while any does)",
                obj(
                    ["model_versions"],
                    model_versions=array(obj(model_id=INTEGER, model_name=STRING, version=INTEGER)),
                ),
                trial_scope=TrialScope.CHECKPOINT_READ,
                description="what the Core API's checkpoint.delete() asks before it deletes "
                "a checkpoint's files",
            )
        },
        (CHECKPOINT_UUID,),
    ),
    *MODEL_ROUTES,
    *USER_ROUTES,
    *WORKSPACE_ROUTES,
    *JOB_QUEUE_ROUTES,
    Route(
        "/resources",
        _allocations.ResourcesHandler,
        {
            "get": Operation(
                "Slots and GPUs, and who holds them",
                obj(["slots"], slots=array(ref("Slot")), gpus=array(OBJECT), cluster=OBJECT),
                description="read_access 'own': a slot another user's run holds shows "
                'allocation_id "(another user\'s)" and no trial_id',
                reads=Listing("slots", "slot"),
            )
        },
    ),
    Route(
        "/resource-pools",
        _allocations.ResourcePoolsHandler,
        {
            "get": Operation(
                "The resource pools (Determined's GetResourcePools): each pool's name, slots "
                "available and used, slot type, scheduler type, whether it is the default",
                obj(
                    ["resourcePools", "pagination"],
                    resourcePools=array(OBJECT),
                    pagination=OBJECT,
                ),
                reads=Reads.ANYONE,  # pools and their counts: nothing of any one user's
            )
        },
    ),
    Route(
        "/events",
        _events.EventsHandler,
        {
            "get": Operation(
                "Server-sent events: `event: <type>` + `data: <json>`; `: keepalive` every 15 s",
                STRING,
                content_type="text/event-stream",
                reads=Reads.STREAM,
                query=(
                    Param("experiment_id", "integer", "only this experiment"),
                    Param("trial_id", "integer", "only this trial"),
                    Param("types", "csv", "only these event types", enum=EVENT_TYPES),
                ),
            )
        },
    ),
)
