"""Store rows -> the JSON objects of docs/rest-api.md ("Objects")."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from master_lite._core._secrets import redact_config

if TYPE_CHECKING:
    from master_lite.store import CheckpointRow, ExperimentRow


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
    """What an ACTIVE trial is doing: "RUNNING" while an allocation holds its slots, "QUEUED"
    while it waits for them (the scheduler has not granted its request yet); None otherwise."""
    if state != "ACTIVE":
        return None
    return "RUNNING" if allocation is not None else "QUEUED"


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
