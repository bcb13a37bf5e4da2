"""The parameters, request bodies and answers the route table (`_routes.py`) declares.

Names here are shared by the table, the handlers and the tests; the route table itself says
which endpoint uses which.
"""

from __future__ import annotations

from typing import Any

from master_lite._core import _limits
from master_lite.api._declarations import Param, PathParam
from master_lite.api._openapi import (
    BOOLEAN,
    INTEGER,
    OBJECT,
    STRING,
    array,
    nullable,
    obj,
    ref,
)
from master_lite.experiments import EXPERIMENT_ACTIONS

# Fields with a size limit (master_lite._core._limits; docs/rest-api.md, "Limits"): the schema
# carries it, so the OpenAPI document shows it and a body over it is a 400 naming both.
NAME = {**STRING, "minLength": 1, "maxLength": _limits.MAX_NAME_CHARS}
DESCRIPTION = {**STRING, "maxLength": _limits.MAX_DESCRIPTION_CHARS}
NOTES = {**STRING, "maxLength": _limits.MAX_NOTES_CHARS}
LABELS = {
    **array({**STRING, "minLength": 1, "maxLength": _limits.MAX_LABEL_CHARS}),
    "maxItems": _limits.MAX_LABELS,
}
SLOTS = {**INTEGER, "minimum": 0, "maximum": _limits.MAX_SLOTS}

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
SIZE = {"oneOf": [INTEGER, {**STRING, "pattern": "^[0-9]{1,19}$"}]}

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
    parent_id=nullable(
        {
            **INTEGER,
            "description": (
                "fork this experiment (Determined's parentId): without a context, the "
                "parent's model definition and notebook origin are used"
            ),
        }
    ),
    projectId=nullable(
        {
            **INTEGER,
            "description": (
                "the project it goes into (Determined's); else the config's workspace and "
                "project, else a fork's parent's project, else 1 (Uncategorized)"
            ),
        }
    ),
)

TRIAL_EXPERIMENT_BODY = obj(
    max_length=nullable(
        {
            **INTEGER,
            "minimum": 1,
            "description": (
                "the new experiment's searcher.max_length, in the parent's unit (default: the "
                "parent's)"
            ),
        }
    ),
    activate={**BOOLEAN, "default": True},
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
