"""Metric reports as the SDK returns them (Determined's `TrialMetrics`)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any


@dataclasses.dataclass
class TrialMetrics:
    """One metric report of a trial.

    Attributes:
        trial_id: the trial that reported it.
        trial_run_id: the run (1 for the first, +1 per restart) that reported it.
        steps_completed: the `steps_completed` the report was made at.
        end_time: when it was reported (UTC).
        metrics: the reported metrics, name -> value.
        group: the metric group ("training", "validation", or any custom group).
        batch_metrics: always None here (Determined: "do not use").
    """

    trial_id: int
    trial_run_id: int
    steps_completed: int
    end_time: datetime.datetime
    metrics: dict[str, Any]
    group: str
    batch_metrics: list[dict[str, Any]] | None = None

    @property
    def total_batches(self) -> int:
        """Deprecated in Determined: the same as `steps_completed`."""
        return self.steps_completed

    @classmethod
    def _from_json(cls, report: dict) -> TrialMetrics:
        return cls(
            trial_id=int(report["trial_id"]),
            trial_run_id=int(report.get("trial_run_id") or 0),
            steps_completed=int(report.get("steps_completed") or 0),
            end_time=parse_time(report.get("report_time")),
            metrics=dict(report.get("metrics") or {}),
            group=str(report.get("group")),
        )


def parse_time(text: str | None) -> datetime.datetime:
    """A datetime (UTC) of the master's ISO-8601 time (`2026-11-22T01:02:03.456Z`)."""
    if not text:
        return datetime.datetime.fromtimestamp(0, datetime.timezone.utc)
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
