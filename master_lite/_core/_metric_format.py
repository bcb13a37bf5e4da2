"""Checks on what trials report (metrics, checkpoints), before anything is stored."""

from __future__ import annotations

import math
import time
from typing import Any, TypeGuard

from master_lite import errors
from master_lite._core._serialize import parse_time


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_json_value(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v) for k, v in value.items())
    return False


_second_cache: dict[str, int] = {}


def _report_time(value: Any) -> float | None:
    """`parse_time`, with a fast path for the form the harness sends, `2026-11-22T01:02:03.456Z`:
    reports come in runs within the same second, so the second is parsed once (the general
    parser costs more than the rest of a report's checks)."""
    if (
        isinstance(value, str)
        and len(value) == 24
        and value[19] == "."
        and value[23] == "Z"
        and value[20:23].isascii()
        and value[20:23].isdigit()
    ):
        second = value[:19]
        epoch = _second_cache.get(second)
        if epoch is None:
            parsed = parse_time(second + "Z")
            assert parsed is not None
            epoch = int(parsed)
            if len(_second_cache) > 1000:  # many trials' reports interleave: keep it small
                _second_cache.clear()
            _second_cache[second] = epoch
        # The same float parse_time gives (datetime's timestamp() divides microseconds so).
        return (epoch * 10**6 + int(value[20:23]) * 1000) / 10**6
    return parse_time(value)


def normalize_metric_reports(reports: Any, *, trial_id: int, default_run_id: int) -> list[dict]:
    """Validated rows ready for `Store.insert_metrics`; InvalidRequest lists every bad field."""
    if not isinstance(reports, list):
        raise errors.InvalidRequest("reports: expected a list of metric reports")
    problems: list[str] = []
    rows: list[dict] = []
    now = time.time()
    for index, report in enumerate(reports):
        where = f"reports[{index}]"
        if not isinstance(report, dict):
            problems.append(f"{where}: expected an object, got {type(report).__name__}")
            continue
        group = report.get("group")
        if not isinstance(group, str) or not group:
            problems.append(f"{where}.group: must be a non-empty string, got {group!r}")
        elif "." in group:
            problems.append(f"{where}.group: {group!r} may not contain '.'")
        steps = report.get("steps_completed")
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            problems.append(f"{where}.steps_completed: must be an integer >= 0, got {steps!r}")
        metrics = report.get("metrics")
        if not isinstance(metrics, dict):
            problems.append(f"{where}.metrics: must be an object, got {type(metrics).__name__}")
        else:
            for key, value in metrics.items():
                if group == "validation" and value is None:
                    problems.append(
                        f"{where}.metrics.{key}: a validation metric may not be null "
                        "(report a number)"
                    )
                elif not _is_json_value(value):  # NaN/inf floats pass: Determined keeps them
                    problems.append(
                        f"{where}.metrics.{key}: {type(value).__name__} is not a JSON value"
                    )
        batch_metrics = report.get("batch_metrics")
        if batch_metrics is not None and not isinstance(batch_metrics, list):
            problems.append(f"{where}.batch_metrics: must be a list or null")
        run_id = report.get("trial_run_id", default_run_id)
        if run_id is None:
            run_id = default_run_id
        try:
            report_time = _report_time(report.get("report_time")) or now
        except (TypeError, ValueError):
            problems.append(
                f"{where}.report_time: not an ISO-8601 time: {report.get('report_time')!r}"
            )
            report_time = now
        rows.append(
            {
                "trial_id": trial_id,
                "trial_run_id": int(run_id),
                "group": group,
                "steps_completed": steps,
                "metrics": metrics,
                "batch_metrics": batch_metrics,
                "report_time": report_time,
            }
        )
    if problems:
        raise errors.InvalidRequest(
            f"{len(problems)} invalid metric report field(s) for trial {trial_id}: {problems[0]}",
            problems,
        )
    return rows


def metric_value(metrics: dict | None, name: str | None) -> float | None:
    """The number `metrics[name]` (NaN and infinities too: shown as they are), else None."""
    if not metrics or not name:
        return None
    value = metrics.get(name)
    return float(value) if _is_number(value) else None


def comparable_metric_value(metrics: dict | None, name: str | None) -> float | None:
    """`metric_value` when finite, else None: what picks a best (a trial's best validation,
    the experiment's `best_validation`, checkpoints kept by GC) skips a diverged NaN/Infinity
    as it skips a missing value, so one diverged report never becomes the best."""
    value = metric_value(metrics, name)
    return value if value is not None and math.isfinite(value) else None
