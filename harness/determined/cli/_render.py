"""Rendering for the CLI: plain-text tables, times, durations, metrics, progress bars."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

import tqdm


def format_time(value: str | None) -> str:
    """An ISO-8601 UTC time from the API as local time, e.g. '2026-11-22 02:03:04+0100'."""
    if not value:
        return ""
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.astimezone().strftime("%Y-%m-%d %H:%M:%S%z")


def shown_state(experiment: dict) -> str:
    """The state as Determined's CLI shows it: an ACTIVE experiment is QUEUED or RUNNING (the
    master's `run_state`); `--json` keeps the master's fields as they are."""
    # STOPPING (runs still draining after a pause) is this master's own; Determined's CLI
    # shows only QUEUED or RUNNING in place of ACTIVE.
    if experiment["state"] == "ACTIVE" and experiment.get("run_state") in ("QUEUED", "RUNNING"):
        return str(experiment["run_state"])
    return str(experiment["state"])


def format_progress(progress: float | None) -> str:
    if progress is None:
        return ""
    return f"{100.0 * max(0.0, min(1.0, float(progress))):.1f}%"


def format_value(value: Any) -> str:
    """A cell: floats short, dicts and lists as compact JSON, None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(", ", ": "), default=str)
    return str(value)


def format_metrics(report: dict | None) -> str:
    """`latest_training`/`latest_validation` of a trial as 'loss=0.25 acc=0.9 (step 100)'."""
    if not report:
        return ""
    metrics = report.get("metrics") or {}
    text = " ".join(f"{name}={format_value(value)}" for name, value in sorted(metrics.items()))
    steps = report.get("steps_completed")
    return f"{text} (step {steps})" if steps is not None else text


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by ' | ' with a dashed rule under the header."""
    cells = [[format_value(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [
        " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def format_csv(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The table as CSV (header row first), cells rendered as in `format_table`."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows([format_value(cell) for cell in row] for row in rows)
    return out.getvalue()


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, as_csv: bool) -> None:
    """`format_table` or, with `as_csv`, `format_csv` on stdout."""
    if as_csv:
        sys.stdout.write(format_csv(headers, rows))
    else:
        print(format_table(headers, rows))


def format_record(pairs: Sequence[tuple[str, Any]]) -> str:
    """'Key:   value' lines for describing one object."""
    width = max((len(k) for k, _ in pairs), default=0) + 1
    return "\n".join(f"{(k + ':').ljust(width)} {format_value(v)}" for k, v in pairs)


def print_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str), file=out or sys.stdout)


class ProgressBar:
    """Experiment progress (0..1) as a tqdm bar on stderr; by default only on a terminal."""

    def __init__(
        self, description: str, *, file: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        # tqdm's disable=None means "off when the stream is not a terminal" (logs piped to a file).
        self._bar = tqdm.tqdm(
            total=100,
            desc=description,
            file=file or sys.stderr,
            disable=None if enabled is None else not enabled,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}]",
            leave=True,
        )
        self._shown = 0.0

    def update(self, progress: float | None) -> None:
        if progress is None:
            return
        target = 100.0 * max(0.0, min(1.0, float(progress)))
        if target > self._shown:
            self._bar.update(target - self._shown)
            self._shown = target

    def write(self, line: str, out: TextIO | None = None) -> None:
        """Print a line without tearing the bar (tqdm clears and redraws it)."""
        self._bar.write(line, file=out or sys.stdout)

    def close(self) -> None:
        self._bar.close()
