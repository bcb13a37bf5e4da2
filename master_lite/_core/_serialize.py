"""Store rows -> the JSON objects of docs/rest-api.md ("Objects"), and the one encoder of
every API answer (`dumps`).

Strict JSON: a non-finite float (a diverged `loss=NaN`, an `Infinity`) is stored as it is but
answered as the string "NaN", "Infinity" or "-Infinity", as Determined's API does; bare
`NaN`/`Infinity` tokens are not JSON and make a browser's `JSON.parse` fail.
"""

from __future__ import annotations

import datetime
import enum
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from master_lite._core._secrets import redact_config

if TYPE_CHECKING:
    from master_lite.store import CheckpointRow, ExperimentRow


# Python's json module writes these tokens for non-finite floats (allow_nan=True).
_NON_FINITE_TOKENS = ("NaN", "Infinity")


def json_default(value: Any) -> Any:
    """`json.dumps(default=)` for what answers hold besides JSON types: datetimes (UTC, ISO 8601
    with a Z), enums (their values) and sets/tuples (lists)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="milliseconds") + "Z"
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def non_finite_text(value: float) -> str:
    """The string a non-finite float is answered as: "NaN", "Infinity" or "-Infinity"."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def finite_json(value: Any) -> Any:
    """`value` with each non-finite float (at any depth) replaced by `non_finite_text`;
    tuples and sets become lists, as the encoder would write them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else non_finite_text(value)
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [finite_json(item) for item in value]
    return value


def non_finite_path(value: Any, path: str) -> str | None:
    """Where in `value` (a decoded JSON body part named `path`) the first NaN or infinite
    number sits, as `path.key[index]`; None when there is none. For input where such a number
    means nothing (model metadata): 400 names the field instead of storing it."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:  # iterative: a deep body never recurses here
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
    return None


def dumps(payload: Any, default: Callable[[Any], Any] | None = None) -> str:
    """`payload` as strict JSON text (RFC 8259: no NaN/Infinity tokens); see the module doc.

    The usual answer holds no non-finite float and is encoded once; only one that does (a
    diverged run's) is copied with `finite_json` and encoded again."""
    try:
        return json.dumps(payload, default=default, allow_nan=False)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise  # a circular reference: no copy would end
        return json.dumps(finite_json(payload), default=default, allow_nan=False)


def strict_json_text(text: str) -> str:
    """JSON text that may hold Python's NaN/Infinity tokens (metrics spliced together in
    SQLite, `store._queries`) as strict JSON. Text without those words anywhere is returned as
    it is; otherwise it is decoded and encoded again (the words may sit inside strings only,
    which the round trip keeps)."""
    if not any(token in text for token in _NON_FINITE_TOKENS):
        return text
    return dumps(json.loads(text))


def iso(timestamp: float | None) -> str | None:
    """Epoch seconds -> `2026-11-22T01:02:03.456Z`."""
    if timestamp is None:
        return None
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(value: Any) -> float | None:
    """ISO-8601 string or epoch number -> epoch seconds (None stays None)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    # Python < 3.11 rejects nanosecond fractions: keep microseconds.
    if "." in text:
        head, _, rest = text.partition(".")
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        text = f"{head}.{digits[:6]}{rest}"
    moment = datetime.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def searcher_summary(config: dict) -> dict:
    searcher = config.get("searcher") or {}
    return {
        "name": searcher.get("name"),
        "metric": searcher.get("metric"),
        "smaller_is_better": bool(searcher.get("smaller_is_better", True)),
    }


def experiment_json(
    row: ExperimentRow, *, num_trials: int, best_validation: float | None, with_config: bool = False
) -> dict:
    """The Experiment object of the API, from its typed row."""
    out = {
        "id": row.id,
        "name": row.name,
        "description": row.description or "",
        "notes": row.notes or "",
        "labels": row.labels or [],
        "state": row.state,
        "archived": row.archived,
        "progress": float(row.progress or 0.0),
        "start_time": iso(row.start_time),
        "end_time": iso(row.end_time),
        "searcher": searcher_summary(row.config),
        "num_trials": num_trials,
        "best_validation": best_validation,
        "context_hash": row.context_hash,
        "notebook": row.notebook,
        "parent_id": row.parent_id,
        # Trains in a Jupyter kernel (core_v2): the master runs nothing for it.
        "unmanaged": bool(row.config.get("unmanaged")),
    }
    if with_config:
        out["config"] = redact_config(row.config)  # secrets stay in the store
    return out


def owner_json(owner_id: int, username: str | None) -> dict:
    """Determined's owner fields of an experiment or model: `userId`, `username`."""
    return {"userId": owner_id, "username": username}


def place_json(project_id: int, places: dict[int, tuple[str, int, str]]) -> dict:
    """Determined's project fields of an experiment: `projectId`, `projectName`,
    `workspaceId`, `workspaceName` (`places`: the store's `projects.names()`)."""
    project_name, workspace_id, workspace_name = places.get(project_id, (None, None, None))
    return {
        "projectId": project_id,
        "projectName": project_name,
        "workspaceId": workspace_id,
        "workspaceName": workspace_name,
    }


def metric_summary(row: dict | None) -> dict | None:
    if row is None:
        return None
    return {
        "steps_completed": row["steps_completed"],
        "metrics": row["metrics"],
        "report_time": iso(row["report_time"]),
    }


def trial_json(
    row: dict,
    *,
    allocation: dict | None,
    latest_training: dict | None,
    latest_validation: dict | None,
    best_validation: dict | None,
    searcher_metric: float | None,
) -> dict:
    """From the trial row and its latest/best metric rows."""
    return trial_json_from_summaries(
        row,
        allocation=allocation,
        latest_training=metric_summary(latest_training),
        latest_validation=metric_summary(latest_validation),
        best_validation=metric_summary(best_validation),
        searcher_metric=searcher_metric,
        start_time=iso(row["start_time"]),
        end_time=iso(row["end_time"]),
    )


def run_state(state: str, allocation: dict | None) -> str | None:
    """What a trial's run is doing: "STOPPING" once its run was asked to exit (a pause, the
    master stopping, a cancel) until it has (the trial may already read PAUSED: the run still
    trains, checkpoints or ignores the signal for up to the grace); of an ACTIVE trial,
    "RUNNING" while an allocation holds its slots, "QUEUED" while it waits for them; None
    otherwise."""
    if allocation is not None and allocation.get("preempt"):
        return "STOPPING"
    if state != "ACTIVE":
        return None
    return "RUNNING" if allocation is not None else "QUEUED"


def stop_reason(allocation: dict | None) -> str | None:
    """Why a STOPPING run was asked to exit: its end intent ("pause", "master-stop", "cancel",
    "stop", "kill", "kill-trial"), or None while it is not stopping."""
    if allocation is None or not allocation.get("preempt"):
        return None
    intent = allocation.get("intent")
    return str(intent) if intent else None


def trial_json_from_summaries(
    row: dict,
    *,
    allocation: dict | None,
    latest_training: dict | None,
    latest_validation: dict | None,
    best_validation: dict | None,
    searcher_metric: float | None,
    start_time: str | None,
    end_time: str | None,
    wait_reason: str | None = None,
) -> dict:
    """From the trial row with the metric summaries (`metric_summary`) and times (`iso`)
    already made, as the store's trial reads (`store._queries.trial_rows`) return them."""
    return {
        "id": row["id"],
        "experiment_id": row["experiment_id"],
        "request_id": row["request_id"],
        "state": row["state"],
        "hparams": row["hparams"],
        "seed": row["seed"],
        "restarts": row["restarts"],
        "run_id": row["run_id"],
        "steps_completed": row["steps_completed"],
        "progress": float(row["progress"] or 0.0),
        "runner_state": row["runner_state"] or "",
        "start_time": start_time,
        "end_time": end_time,
        "exit_code": row["exit_code"],
        "exit_summary": row.get("exit_summary"),
        "run_state": run_state(row["state"], allocation),
        "stop_reason": stop_reason(allocation),
        # Why a QUEUED trial waits (the scheduler's words), else None.
        "wait_reason": wait_reason if run_state(row["state"], allocation) == "QUEUED" else None,
        "kernel_kept": bool(row.get("kernel_kept")),
        "notebook_error": row.get("notebook_error"),
        "allocation_id": allocation["id"] if allocation else None,
        "slot_ids": allocation["slot_ids"] if allocation else [],
        "latest_checkpoint": row["latest_checkpoint"],
        "latest_training": latest_training,
        "latest_validation": latest_validation,
        "best_validation": best_validation,
        "searcher_metric": searcher_metric,
    }


def metric_json(row: dict) -> dict:
    return {
        "id": row["id"],
        "trial_id": row["trial_id"],
        "trial_run_id": row["trial_run_id"],
        "group": row["group"],
        "steps_completed": row["steps_completed"],
        "metrics": row["metrics"],
        "report_time": iso(row["report_time"]),
    }


def log_json(row: dict) -> dict:
    return {
        "id": row["id"],
        "trial_id": row["trial_id"],
        "rank": row["rank"],
        "stream": row["stream"],
        "time": iso(row["time"]),
        "line": row["line"],
    }


def checkpoint_json(row: CheckpointRow, *, validation_metrics: dict | None) -> dict:
    """The Checkpoint object of the API, from its typed row."""
    return {
        "uuid": row.uuid,
        "trial_id": row.trial_id,
        "experiment_id": row.experiment_id,
        "allocation_id": row.allocation_id,
        "steps_completed": row.steps_completed,
        "metadata": row.metadata,
        "resources": row.resources,
        "state": row.state,
        "report_time": iso(row.report_time),
        "path": row.path,
        "validation_metrics": validation_metrics,
    }
