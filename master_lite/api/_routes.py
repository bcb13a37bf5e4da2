"""The route table: every endpoint, its methods, parameters, schemas and trial scope.

This is the one place that says what a trial token may call (`trial_scope`); handlers, auth
and the OpenAPI document all read it from here.
"""

from __future__ import annotations

from typing import Any

from master_lite.api import _allocations, _checkpoints, _events, _experiments, _openapi, _trials
from master_lite.api._declarations import Operation, Param, PathParam, Route, TrialScope
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

EXPERIMENT_ACTIONS = ("pause", "activate", "cancel", "kill", "archive", "unarchive")
EVENT_TYPES = ("experiment", "trial", "metric", "log", "checkpoint")

EXPERIMENT_ID = PathParam("experiment_id", r"[0-9]+", INTEGER, int, "experiment id")
TRIAL_ID = PathParam("trial_id", r"[0-9]+", INTEGER, int, "trial id")
ALLOCATION_ID = PathParam(
    "allocation_id", r"[^/]+", STRING, str, "allocation id, trial-<trial id>.<run id>"
)
CHECKPOINT_UUID = PathParam("uuid", r"[^/]+", STRING, str, "checkpoint uuid")
ACTION = PathParam(
    "action",
    "|".join(EXPERIMENT_ACTIONS),
    {**STRING, "enum": list(EXPERIMENT_ACTIONS)},
    str,
    "what to do with the experiment",
)

AFTER_ID = Param("after_id", "integer", "only records with a larger id", default=0, minimum=0)
LIMIT = Param("limit", "integer", "at most this many records", minimum=1)
# Paging and downsampling of the reads that can be large (docs/rest-api.md).
OFFSET = Param("offset", "integer", "skip this many trials first", minimum=0)
TRIALS_LIMIT = Param("limit", "integer", "at most this many trials (all when not set)", minimum=1)
ORDER_BY = Param(
    "order_by",
    "string",
    "id, -id (newest first) or best (best searcher metric first; trials without a validation last)",
    enum=("id", "-id", "best"),
)
MAX_DATAPOINTS = Param(
    "max_datapoints",
    "integer",
    "per trial and group, keep at most this many reports: the first, the "
    "last and evenly spaced ones between (all when not set)",
    minimum=2,
)
TRIAL_IDS = Param(
    "trial_ids", "csv", "only these trials of the experiment (comma-separated ids, at most 1000)"
)
TIMEOUT = Param(
    "timeout_seconds",
    "number",
    "long poll: answer after at most this long",
    default=60.0,
    minimum=0,
    maximum=3600,
)

EXPERIMENT_ANSWER = obj(["experiment"], experiment=ref("Experiment"))
TRIAL_ANSWER = obj(["trial"], trial=ref("Trial"))
CHECKPOINT_ANSWER = obj(["checkpoint"], checkpoint=ref("Checkpoint"))
METRICS_ANSWER = obj(["metrics"], metrics=array(ref("Metric")))
GZIP = {"type": "string", "format": "binary"}
# Determined's gRPC gateway writes int64 as a JSON string; accept both.
SIZE = {"oneOf": [INTEGER, {**STRING, "pattern": "^[0-9]+$"}]}

_METRIC_REPORT = obj(
    ["group", "steps_completed", "metrics"],
    group=STRING,
    steps_completed=INTEGER,
    metrics=OBJECT,
    batch_metrics=array(OBJECT),
    report_time=STRING,
    trial_run_id=INTEGER,
)
_DETERMINED_METRICS = obj(
    ["stepsCompleted"],
    trialId=INTEGER,
    trialRunId=INTEGER,
    stepsCompleted=INTEGER,
    reportTime=STRING,
    metrics=obj(avgMetrics=OBJECT, batchMetrics=array(OBJECT)),
)
METRICS_BODY = {
    "oneOf": [
        obj(["reports"], reports=array(_METRIC_REPORT)),
        # Never both: a body with `reports` is the batch form (and validated as such).
        {
            **obj(["group", "metrics"], group=STRING, metrics=_DETERMINED_METRICS),
            "not": {"required": ["reports"]},
        },
    ]
}

_OPTIONAL_REPORT_FIELDS = {"report_time": str, "trial_run_id": int}


def is_plain_metrics_batch(body: Any) -> bool:
    """True when `body` is a well-formed batch of reports in exactly METRICS_BODY's batch form.

    Checking this by hand costs a few microseconds per report where the generic validator
    costs milliseconds per thousand, which dominated ingestion. Metric *values* are the
    facade's to check, as for every other body form.
    """
    if type(body) is not dict or "group" in body or type(body.get("reports")) is not list:
        return False
    for report in body["reports"]:
        if (
            type(report) is not dict
            or type(report.get("group")) is not str
            or type(report.get("steps_completed")) is not int  # bool is not an integer
            or type(report.get("metrics")) is not dict
        ):
            return False
        if "batch_metrics" in report:
            batch = report["batch_metrics"]
            if type(batch) is not list or any(type(item) is not dict for item in batch):
                return False
        for key, kind in _OPTIONAL_REPORT_FIELDS.items():
            if key in report and type(report[key]) is not kind:
                return False
    return True


CREATE_EXPERIMENT_BODY = obj(
    ["config"],
    config={"oneOf": [STRING, OBJECT], "description": "YAML/JSON text or an object"},
    context=nullable({**STRING, "description": "base64 of the context tar.gz"}),
    activate={**BOOLEAN, "default": True},
    archived={**BOOLEAN, "default": False},
    notebook=nullable(obj(path=STRING, cell_ids=array(STRING), script=STRING)),
)

CHECKPOINT_BODY = {
    **obj(
        ["uuid", "metadata", "resources"],
        uuid=STRING,
        allocationId=nullable(STRING),
        trialId=INTEGER,
        taskId=STRING,
        metadata=OBJECT,
        resources={"type": "object", "additionalProperties": SIZE},
        reportTime=STRING,
        state={**STRING, "enum": ["COMPLETED"]},
        storageId=nullable(INTEGER),
        training=OBJECT,
    ),
    "anyOf": [{"required": ["trialId"]}, {"required": ["taskId"]}],
}

ROUTES: tuple[Route, ...] = (
    Route(
        "/master",
        _allocations.MasterInfoHandler,
        {
            "get": Operation(
                "What this master is", obj(version=STRING, root_dir=STRING, cluster_id=STRING)
            )
        },
    ),
    Route(
        "/openapi.json",
        _openapi.OpenAPIHandler,
        {"get": Operation("This document", OBJECT, auth=False)},
    ),
    Route(
        "/experiments",
        _experiments.ExperimentsHandler,
        {
            "get": Operation(
                "List experiments, ordered by id",
                obj(["experiments"], experiments=array(ref("Experiment"))),
                query=(
                    Param("state", "string", "only experiments in this state"),
                    Param("name", "string", "only names containing this"),
                    Param("archived", "boolean", "only (un)archived experiments"),
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
            )
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
        "/experiments/{experiment_id}/context",
        _experiments.ExperimentContextHandler,
        {"get": Operation("The stored context (tar.gz)", GZIP, content_type="application/gzip")},
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
            )
        },
        (EXPERIMENT_ID, ACTION),
    ),
    Route(
        "/trials/{trial_id}",
        _trials.TrialHandler,
        {"get": Operation("A trial", TRIAL_ANSWER)},
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/notebook",
        _trials.TrialNotebookHandler,
        {
            "get": Operation(
                "The executed notebook of a notebook trial's latest run",
                GZIP,
                content_type="application/x-ipynb+json",
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/kill",
        _trials.TrialKillHandler,
        {"post": Operation("Kill a trial", TRIAL_ANSWER)},
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/metrics",
        _trials.TrialMetricsHandler,
        {
            "get": Operation(
                "Metric reports of a trial",
                METRICS_ANSWER,
                query=(
                    Param("group", "string", "only this group, e.g. training"),
                    AFTER_ID,
                    LIMIT,
                    MAX_DATAPOINTS,
                ),
            ),
            "post": Operation(
                "Report metrics (Determined's form or a batch)",
                obj(["accepted"], accepted=INTEGER),
                request=METRICS_BODY,
                fast_accept=is_plain_metrics_batch,
                trial_scope=TrialScope.TRIAL,
            ),
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/logs",
        _trials.TrialLogsHandler,
        {
            "get": Operation(
                "Log lines of a trial, ascending id",
                obj(["logs"], logs=array(ref("Log"))),
                query=(
                    AFTER_ID,
                    LIMIT,
                    Param("tail", "integer", "only the last N lines", minimum=0),
                    Param("rank", "integer", "only this rank", minimum=0),
                    Param(
                        "stream", "string", "only this stream", enum=("stdout", "stderr", "master")
                    ),
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/progress",
        _trials.TrialProgressHandler,
        {
            "post": Operation(
                "Report training progress",
                EMPTY,
                trial_scope=TrialScope.TRIAL,
                # Not bounded here: the facade clamps to 0..1, and a harness that
                # overshoots should not crash its trial over a progress bar.
                request=obj(
                    ["progress"],
                    progress={**NUMBER, "description": "fraction done, 0..1"},
                    is_raw=BOOLEAN,
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/runner/metadata",
        _trials.RunnerMetadataHandler,
        {
            "post": Operation(
                "Report what the trial process is doing",
                EMPTY,
                trial_scope=TrialScope.TRIAL,
                request=obj(["state"], state=STRING),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/early_exit",
        _trials.EarlyExitHandler,
        {
            "post": Operation(
                "Report that the trial exits early (400 if already reported)",
                EMPTY,
                trial_scope=TrialScope.TRIAL,
                request=obj(
                    ["reason"],
                    reason={
                        **STRING,
                        "enum": ["EXITED_REASON_INVALID_HP", "EXITED_REASON_USER_REQUESTED_STOP"],
                    },
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/searcher/operation",
        _trials.SearcherOperationHandler,
        {
            "get": Operation(
                "Long poll for the trial's next searcher operation",
                obj(
                    ["completed", "op"],
                    completed=BOOLEAN,
                    op=nullable(obj(validateAfter=obj(length=STRING))),
                ),
                trial_scope=TrialScope.TRIAL,
                query=(TIMEOUT,),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/searcher/completed_operation",
        _trials.CompletedOperationHandler,
        {
            "post": Operation(
                "Report a searcher operation done, with its metric",
                EMPTY,
                trial_scope=TrialScope.TRIAL,
                request=obj(
                    ["op"], op=obj(["length"], length={**SIZE}), searcherMetric=nullable(NUMBER)
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/allocations/{allocation_id}/signals/preemption",
        _allocations.PreemptionHandler,
        {
            "get": Operation(
                "Long poll: should this allocation stop (pause, kill)?",
                obj(["preempt"], preempt=BOOLEAN),
                trial_scope=TrialScope.ALLOCATION,
                query=(TIMEOUT,),
            )
        },
        (ALLOCATION_ID,),
    ),
    Route(
        "/allocations/{allocation_id}/signals/ack_preemption",
        _allocations.AckPreemptionHandler,
        {
            "post": Operation(
                "Acknowledge the preemption signal", EMPTY, trial_scope=TrialScope.ALLOCATION
            )
        },
        (ALLOCATION_ID,),
    ),
    Route(
        "/checkpoints",
        _checkpoints.CheckpointsHandler,
        {
            "post": Operation(
                "Register a checkpoint written to checkpoint storage",
                CHECKPOINT_ANSWER,
                request=CHECKPOINT_BODY,
                trial_scope=TrialScope.CHECKPOINT_REPORT,
            ),
            "patch": Operation(
                "Mark checkpoints deleted",
                EMPTY,
                trial_scope=TrialScope.CHECKPOINT_DELETE,
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
            )
        },
        (CHECKPOINT_UUID,),
    ),
    Route(
        "/checkpoints/{uuid}/download",
        _checkpoints.CheckpointDownloadHandler,
        {
            "get": Operation(
                "The checkpoint directory as tar.gz", GZIP, content_type="application/gzip"
            )
        },
        (CHECKPOINT_UUID,),
    ),
    Route(
        "/resources",
        _allocations.ResourcesHandler,
        {
            "get": Operation(
                "Slots and GPUs, and who holds them",
                obj(["slots"], slots=array(ref("Slot")), gpus=array(OBJECT)),
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
                query=(
                    Param("experiment_id", "integer", "only this experiment"),
                    Param("trial_id", "integer", "only this trial"),
                    Param("types", "csv", "only these event types", enum=EVENT_TYPES),
                ),
            )
        },
    ),
)
