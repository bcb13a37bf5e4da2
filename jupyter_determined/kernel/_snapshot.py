"""The experiment output's static representations: `text/html` and `text/plain`.

They are for readers without the labextension (an nbconvert export, GitHub's render of a saved
notebook, a frontend without it): a record of the experiment when the output was last written,
never updated by themselves. The live view, and everything interactive (zoom, hover, trial
selection, logs, buttons), is the labextension's (labextension/src/notebook/). So this module
draws only what a reader of a static page needs: the experiment's line, the best trials, and
their validation curves as one SVG. Its numbers are formatted as the live view formats them.
"""

from __future__ import annotations

import html
import math
from typing import Any

from jupyter_determined._contract import LOG_LINE_MAX_CHARS

# JupyterLab sanitizes text/html outputs after every change of the notebook: the snapshot shows
# the best trials and a few hundred points, not the whole search.
HTML_MAX_TRIALS = 25
HTML_MAX_SERIES = 10
HTML_POINTS_PER_SERIES = 60

CHART_WIDTH, CHART_HEIGHT = 640, 200
CHART_MARGIN = 48  # left, for the y labels; the other sides get a quarter of it
# Colours that read on light and dark backgrounds (Tableau 10, which JupyterLab users know).
COLORS = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
STATE_COLORS = {"COMPLETED": "#3a9a4a", "ERROR": "#d6393a", "CANCELED": "#888888"}


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def format_number(value: Any) -> str:
    """A number as a person reads it: 4 significant digits, exponent form when tiny or huge."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        return f"{value:.3e}"
    return f"{value:.4g}"


def cut_line(text: str, limit: int = LOG_LINE_MAX_CHARS) -> str:
    """One log line, shortened to `limit` characters with a note of how much was cut."""
    text = text.rstrip("\n")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def display_state(trial: dict) -> str:
    """The state a person should see: a trial waiting for slots is QUEUED, not ACTIVE; one whose
    run was asked to exit (paused, preempted) and has not yet is PAUSING (as the live view)."""
    state = str(trial.get("state") or "")
    if state == "ACTIVE" and trial.get("run_state") == "QUEUED":
        return "QUEUED"
    if state in ("ACTIVE", "PAUSED") and trial.get("run_state") == "STOPPING":
        return "PAUSING"
    return state


# Why a run was asked to exit (`stop_reason`), in the live view's words (model/states.ts).
STOP_REASONS = {
    "pause": "user pause",
    "master-stop": "master stopping",
    "cancel": "experiment canceled",
    "stop": "the searcher stopped it",
    "kill": "killed",
    "kill-trial": "killed",
}
PREEMPTED_NOTE = (
    "preempted: the scheduler gave its slots to another job; it resumes from its checkpoint"
)


def trial_note(trial: dict) -> str:
    """Why a trial is where it is, in words ('' when nothing needs saying): why it ended
    (ERROR, CANCELED), why it waits (QUEUED: the scheduler's wait_reason), or why its run is
    stopping (preempted by the scheduler, paused, ...)."""
    state = display_state(trial)
    if state in ("ERROR", "CANCELED"):
        return str(trial.get("exit_summary") or "")
    if state == "QUEUED":
        return str(trial.get("wait_reason") or "")
    if state == "PAUSING":
        reason = trial.get("stop_reason")
        if reason == "rebalance":
            return PREEMPTED_NOTE
        return f"stopping: {STOP_REASONS.get(str(reason), 'asked to stop')}"
    return ""


def _best_of(trial: dict, metric: str) -> Any:
    return ((trial.get("best_validation") or {}).get("metrics") or {}).get(metric)


def top_trials(trials: list[dict], metric: str, smaller_is_better: bool, limit: int) -> list[dict]:
    """The `limit` trials with the best validation of `metric` (then the rest by id), by id."""

    def rank(trial: dict) -> tuple:
        value = _best_of(trial, metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return (1, 0.0, trial.get("id") or 0)
        return (0, value if smaller_is_better else -value, trial.get("id") or 0)

    return sorted(sorted(trials, key=rank)[:limit], key=lambda trial: trial.get("id") or 0)


def curves_of(metrics: list[dict], group: str, metric: str) -> dict[str, list[list[float]]]:
    """trial id (str) -> [[steps, value], ...] of the `group` reports of `metric`."""
    curves: dict[str, list[list[float]]] = {}
    for report in metrics:
        value = (report.get("metrics") or {}).get(metric)
        if report.get("group") != group or isinstance(value, bool):
            continue
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        point = [float(report.get("steps_completed") or 0), float(value)]
        series = curves.setdefault(str(report.get("trial_id")), [])
        if point not in series:
            series.append(point)
    return curves


def thin(points: list[list[float]], limit: int) -> list[list[float]]:
    """At most `limit` of `points`, evenly spaced, the first and the last always kept."""
    if len(points) <= limit or limit < 2:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def render_trials_table(trials: list[dict], metric: str) -> str:
    """The trials as an HTML table: id, state (and why it ended, waits or is preempted),
    hyperparameters, steps, best."""
    if not trials:
        return "<div><i>no trials yet</i></div>"
    cell = "padding:2px 10px 2px 0;text-align:left;vertical-align:top"
    rows = []
    for trial in trials:
        state = display_state(trial)
        note = trial_note(trial)
        hparams = (
            ", ".join(
                f"{key}={format_number(value)}" for key, value in sorted(trial["hparams"].items())
            )
            if trial.get("hparams")
            else ""
        )
        values = (
            _esc(trial.get("id")),
            f"<span style='color:{STATE_COLORS.get(state, 'inherit')}'>{_esc(state)}</span>"
            + (f"<br><small>{_esc(note)}</small>" if note else ""),
            _esc(hparams),
            _esc(trial.get("steps_completed", 0)),
            _esc(format_number(_best_of(trial, metric))),
        )
        rows.append("<tr>" + "".join(f"<td style='{cell}'>{v}</td>" for v in values) + "</tr>")
    names = ("trial", "state", "hyperparameters", "steps", f"best {metric}")
    header = "".join(f"<th style='{cell}'>{_esc(name)}</th>" for name in names)
    return (
        "<table class='det-trials' style='border-collapse:collapse;font-size:12px'>"
        f"<thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def render_curve_svg(
    curves: dict[str, list[list[float]]], metric: str, best_trial: str | None = None
) -> str:
    """Validation curves as SVG: one line per trial (steps on x), the best one bold, the y
    range labelled at its ends; a one-point series is a dot. It scales to the output's width and
    takes its text colour from the page, so it reads in light and dark themes."""
    series = {key: thin(sorted(pts), HTML_POINTS_PER_SERIES) for key, pts in curves.items() if pts}
    if not series:
        return f"<div><i>no validation {_esc(metric)} yet</i></div>"
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    left, pad = CHART_MARGIN, CHART_MARGIN // 4
    width, height = CHART_WIDTH - left - pad, CHART_HEIGHT - 3 * pad

    def point(x: float, y: float) -> str:
        return (
            f"{left + (x - x0) / (x1 - x0) * width:.1f},{pad + (y1 - y) / (y1 - y0) * height:.1f}"
        )

    text = "font-size='10' fill='currentColor'"
    parts = [
        f"<text x='{left - 4}' y='{pad + 4}' text-anchor='end' {text}>{format_number(y1)}</text>",
        f"<text x='{left - 4}' y='{pad + height}' text-anchor='end' {text}>"
        f"{format_number(y0)}</text>",
        f"<text x='{left}' y='{CHART_HEIGHT - 4}' {text}>steps {format_number(x0)}</text>",
        f"<text x='{left + width}' y='{CHART_HEIGHT - 4}' text-anchor='end' {text}>"
        f"{format_number(x1)}</text>",
    ]
    legend = []
    ordered = sorted(series.items(), key=lambda item: int(item[0]) if item[0].isdigit() else 0)
    for index, (key, points) in enumerate(ordered):
        color, best = COLORS[index % len(COLORS)], key == best_trial
        if len(points) == 1:
            cx, cy = point(*points[0]).split(",")
            parts.append(f"<circle cx='{cx}' cy='{cy}' r='{3.5 if best else 2.5}' fill='{color}'/>")
        parts.append(
            f"<polyline class='det-curve' data-trial='{_esc(key)}' fill='none' stroke='{color}' "
            f"stroke-width='{3 if best else 1.5}' points='{' '.join(point(*p) for p in points)}'/>"
        )
        legend.append(
            f"<span style='color:{color};margin-right:10px;{'font-weight:bold' if best else ''}'>"
            f"— trial {_esc(key)}{' (best)' if best else ''}</span>"
        )
    return (
        f"<svg class='det-chart' viewBox='0 0 {CHART_WIDTH} {CHART_HEIGHT}' width='100%' "
        f"style='max-width:{CHART_WIDTH * 1.5:.0f}px;display:block' role='img' "
        f"xmlns='http://www.w3.org/2000/svg'><title>validation {_esc(metric)} by steps</title>"
        f"{''.join(parts)}</svg><div style='font-size:11px'>{''.join(legend)}</div>"
    )


def _summary(experiment: dict) -> tuple[str, str, float]:
    searcher = experiment.get("searcher") or {}
    state = str(experiment.get("state") or "unknown")
    progress = 1.0 if state == "COMPLETED" else float(experiment.get("progress") or 0.0)
    return str(searcher.get("metric") or "metric"), state, max(0.0, min(1.0, progress))


def snapshot_html(snapshot: dict) -> str:
    """The snapshot as self-contained HTML (no scripts), readable in light and dark pages."""
    experiment = snapshot.get("experiment") or {}
    trials = snapshot.get("trials") or []
    metric, state, progress = _summary(experiment)
    smaller = bool((experiment.get("searcher") or {}).get("smaller_is_better", True))
    shown = top_trials(trials, metric, smaller, HTML_MAX_TRIALS)
    plotted = [str(t.get("id")) for t in top_trials(trials, metric, smaller, HTML_MAX_SERIES)]
    best = next(iter(top_trials(trials, metric, smaller, 1)), None)
    best_id = str(best["id"]) if best and _best_of(best, metric) is not None else None
    curves = curves_of(snapshot.get("metrics") or [], "validation", metric)
    more = len(trials) - len(shown)
    color = STATE_COLORS.get(state, "#4e79a7")
    return (
        f"<div class='det-experiment-snapshot' data-experiment-id='{_esc(experiment.get('id'))}'"
        f" style='font-size:13px'><div><b>Experiment {_esc(experiment.get('id'))}</b> "
        f"{_esc(experiment.get('name'))} — <span class='det-state' style='color:{color};"
        f"font-weight:bold'>{_esc(state)}</span> · {progress:.0%} · best {_esc(metric)} "
        f"{_esc(format_number(experiment.get('best_validation')))}</div>"
        f"<div style='height:6px;max-width:640px;margin:4px 0;background:rgba(127,127,127,0.25)'>"
        f"<div style='height:6px;width:{progress * 100:.0f}%;background:{color}'></div></div>"
        + render_trials_table(shown, metric)
        + (
            f"<div style='font-size:11px;opacity:0.7'>{more} more trials (best {len(shown)} "
            f"shown; curves of the best {len(plotted)})</div>"
            if more > 0
            else ""
        )
        + render_curve_svg({k: curves[k] for k in plotted if k in curves}, metric, best_id)
        + f"<div style='font-size:11px;opacity:0.7'>snapshot taken "
        f"{_esc(snapshot.get('taken_at') or '')}</div></div>"
    )


def snapshot_text(snapshot: dict) -> str:
    """The snapshot as plain text: the experiment's line, then one line per trial (with why it
    waits, was preempted or ended, when there is something to say)."""
    experiment = snapshot.get("experiment") or {}
    metric, state, progress = _summary(experiment)
    lines = [
        f"Experiment {experiment.get('id')} {experiment.get('name') or ''}: {state} "
        f"({progress:.0%})"
    ]
    for trial in snapshot.get("trials") or []:
        note = trial_note(trial)
        lines.append(
            f"  trial {trial.get('id')} {display_state(trial)} "
            f"steps={trial.get('steps_completed', 0)} best {metric}="
            f"{format_number(_best_of(trial, metric))}" + (f" ({note})" if note else "")
        )
    return "\n".join(lines)


__all__ = [
    "cut_line",
    "curves_of",
    "display_state",
    "format_number",
    "render_curve_svg",
    "render_trials_table",
    "snapshot_html",
    "snapshot_text",
    "thin",
    "top_trials",
    "trial_note",
]
