"""What a loop reports and returns, and the metric table a local (off-cluster) run prints."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Report:
    """One report of metrics, as the loop sent it to `core.train`."""

    group: str  # "training" or "validation"
    steps_completed: int
    metrics: dict


@dataclasses.dataclass
class LoopResult:
    """What one run of the loop did."""

    steps_completed: int
    reports: list[Report]
    checkpoints: list[str]  # storage ids, the resumed-from one first
    preempted: bool = False
    stopped_early: bool = False
    searcher_metrics: list[float] = dataclasses.field(default_factory=list)
    last_validation: dict = dataclasses.field(default_factory=dict)


def format_table(reports: list[Report], *, validation_prefix: str = "") -> str:
    """One row per batch count with the training and validation metrics reported at it.

    Args:
        reports: the loop's reports, in order.
        validation_prefix: put before validation metric names (Estimator names training and
            validation loss alike; Keras' validation names already start with "val_").

    Returns:
        The table as text, a header row, a rule, then the rows.
    """
    rows: dict[int, dict] = {}
    names: list[str] = []
    for report in reports:
        prefix = validation_prefix if report.group == "validation" else ""
        shown = {f"{prefix}{name}": value for name, value in report.metrics.items()}
        rows.setdefault(report.steps_completed, {}).update(shown)
        names.extend(name for name in shown if name not in names)
    lines = [["batches", *names]]
    for steps in sorted(rows):
        values = rows[steps]
        lines.append([str(steps)] + [f"{values[n]:.4f}" if n in values else "" for n in names])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = [
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=False))
        for line in lines
    ]
    out.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(out)


def print_validation(report: Report) -> None:
    """`on_report` of local runs: one line per validation."""
    if report.group == "validation":
        shown = ", ".join(f"{name} {value:.4f}" for name, value in report.metrics.items())
        print(f"[local] batches {report.steps_completed}: {shown}", flush=True)


def print_local_summary(
    result: LoopResult,
    *,
    test: bool,
    checkpoint_base: Any = None,
    validation_prefix: str = "",
    detail: str = "",
) -> None:
    """Print a local run's metric table and what it trained.

    Args:
        result: the loop's result.
        test: a `test=True` run (one batch): say that the model definition works.
        checkpoint_base: where the checkpoints are, if known.
        validation_prefix: see `format_table`.
        detail: added after the batch count (e.g. the Estimator's model_dir).
    """
    print(format_table(result.reports, validation_prefix=validation_prefix), flush=True)
    if test:
        print(
            f"[local test] trained {result.steps_completed} batch(es), validated and checkpointed: "
            "the model definition works. Set local=False to submit the experiment to the master.",
            flush=True,
        )
        return
    where = f" under {checkpoint_base}" if checkpoint_base else ""
    print(
        f"[local] trained {result.steps_completed} batches{detail}; checkpoints{where}: "
        f"{', '.join(result.checkpoints)}",
        flush=True,
    )
