"""The experiment widget under a notebook cell: live in the browser, a snapshot everywhere else.

What a cell shows after a submission is one output with three representations:

* `application/vnd.determined.experiment+json` (`MIME_TYPE`): the experiment id and a snapshot
  (experiment, trials, downsampled curves, the latest log lines). The labextension renders it
  as the live experiment view: it talks to the master's API from the browser, so Pause,
  Activate and Kill work while the kernel is busy (a `--wait` cell, a long training cell) or
  gone, and its state is reconciled with the API, so it cannot go stale after a flood of
  output. With no master reachable it shows the snapshot and says so.
* `text/html`: the same snapshot as a table and an SVG chart, for frontends without the
  labextension (classic tools, nbconvert, GitHub) and for saved notebooks opened elsewhere.
* `text/plain`: one line per trial.

The kernel side (`ExperimentWidget`) only keeps that snapshot current: a background thread
polls the experiment (a reconciliation loop, not the event stream, so no event can be missed),
reloads the snapshot when something a person would see changed, updates the output by its
display id, and stops when the experiment has ended — after writing its final state.
"""

from __future__ import annotations

import datetime
import html
import logging
import math
import threading
import uuid
from collections.abc import Callable
from typing import Any

from determined.common.states import TERMINAL_EXPERIMENT_STATES

log = logging.getLogger("jupyter_determined.widgets")

MIME_TYPE = "application/vnd.determined.experiment+json"
TERMINAL = {str(state) for state in TERMINAL_EXPERIMENT_STATES}

# The snapshot travels in the notebook file and JupyterLab copies an output's data whenever it
# reads it: its curves are downsampled by the master (first, last and evenly spaced reports of
# each trial), about 2,000 points per group in all; the live view fetches the rest.
CURVE_POINTS_TOTAL = 2000
CURVE_POINTS_PER_TRIAL = (5, 200)  # bounds per trial
# The text/html fallback is sanitized by JupyterLab (table of contents) after every change of the
# notebook: it shows the best trials and a few hundred points, not the whole search.
HTML_MAX_TRIALS = 25
HTML_MAX_SERIES = 10
HTML_POINTS_PER_SERIES = 60
SPARSE_SERIES_POINTS = 12  # a series this short gets a marker per point (one point: no line)
LOG_TAIL_TRIALS = 3  # the latest log lines of this many of the newest trials
LOG_TAIL_LINES = 8
LOG_LINE_MAX_CHARS = 400  # a 20,000-character line must not become a 20,000-character output

POLL_SECONDS = 1.0  # how often the follower asks the master for the experiment's state
RELOAD_SECONDS = 5.0  # at most this often the (larger) snapshot is reloaded while it runs

CHART_WIDTH, CHART_HEIGHT = 640, 220
CHART_MARGIN = {"left": 56, "right": 12, "top": 10, "bottom": 34}
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
STATE_COLORS = {
    "COMPLETED": "#3a9a4a",
    "ERROR": "#d6393a",
    "CANCELED": "#888888",
    "PAUSED": "#d8890b",
    "STOPPING_CANCELED": "#888888",
    "STOPPING_ERROR": "#d6393a",
    "STOPPING_COMPLETED": "#3a9a4a",
}


def curve_points_per_trial(num_trials: int) -> int:
    """`max_datapoints` for the curves of `num_trials` trials in a snapshot."""
    low, high = CURVE_POINTS_PER_TRIAL
    return max(low, min(high, CURVE_POINTS_TOTAL // max(1, num_trials)))


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


def _hparams_text(hparams: dict) -> str:
    return ", ".join(f"{key}={format_number(value)}" for key, value in sorted(hparams.items()))


def _metric_of(trial: dict, which: str, metric: str) -> Any:
    return ((trial.get(which) or {}).get("metrics") or {}).get(metric)


def display_state(trial: dict) -> str:
    """The state a person should see: a trial waiting for slots is QUEUED, not ACTIVE."""
    state = str(trial.get("state") or "")
    if state == "ACTIVE" and trial.get("run_state") == "QUEUED":
        return "QUEUED"
    return state


# ---------------------------------------------------------------------------------------------
# The static snapshot (HTML + SVG)


def render_trials_table(trials: list[dict], metric: str) -> str:
    """The trials as an HTML table: id, state, hyperparameters, steps, latest and best metric."""
    if not trials:
        return "<div class='det-empty'><i>no trials yet</i></div>"
    cell = "padding:2px 10px 2px 0;text-align:left;vertical-align:top"
    rows = []
    for trial in trials:
        state = display_state(trial)
        note = trial.get("exit_summary") if state in ("ERROR", "CANCELED") else None
        state_html = (
            f"<span style='color:{STATE_COLORS.get(state, 'inherit')}'>{_esc(state)}"
            "</span>" + (f"<br><small>{_esc(note)}</small>" if note else "")
        )
        values = (
            _esc(trial.get("id")),
            state_html,
            _esc(_hparams_text(trial.get("hparams") or {})),
            _esc(trial.get("steps_completed", 0)),
            _esc(format_number(_metric_of(trial, "latest_validation", metric))),
            _esc(format_number(_metric_of(trial, "best_validation", metric))),
        )
        rows.append(
            "<tr>" + "".join(f"<td style='{cell}'>{value}</td>" for value in values) + "</tr>"
        )
    header = "".join(
        f"<th style='{cell}'>{name}</th>"
        for name in (
            "trial",
            "state",
            "hyperparameters",
            "steps",
            f"latest {_esc(metric)}",
            f"best {_esc(metric)}",
        )
    )
    return (
        f"<table class='det-trials' style='border-collapse:collapse;font-size:12px'>"
        f"<thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [low, high] (1, 2, 2.5 or 5 times a power of 10)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high <= low:
        return [low]
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def chart_range(values: list[float]) -> tuple[float, float]:
    """A y range that holds the values with a little room, never padded past zero."""
    low, high = min(values), max(values)
    if high == low:
        pad = abs(low) * 0.1 or 1.0
    else:
        pad = (high - low) * 0.08
    bottom, top = low - pad, high + pad
    if low >= 0 > bottom:  # losses and error rates are never negative: do not suggest they are
        bottom = 0.0
    if high <= 0 < top:
        top = 0.0
    return bottom, top


def thin(points: list[list[float]], limit: int) -> list[list[float]]:
    """At most `limit` of `points`, evenly spaced, the first and the last always kept."""
    if len(points) <= limit or limit < 2:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def render_curve_svg(
    curves: dict[str, list[list[float]]],
    metric: str,
    best_trial: str | None = None,
    title: str = "validation",
) -> str:
    """Learning curves as SVG: one line per trial (steps on x), markers, the best one bold.

    The chart scales to the output's width (viewBox) and its legend sits beside the plot, so it
    never covers the points; colours come from the palette, text from the page's colour."""
    series = {
        key: thin(sorted(points), HTML_POINTS_PER_SERIES)
        for key, points in curves.items()
        if points
    }
    if not series:
        return f"<div class='det-empty'><i>no {_esc(title)} {_esc(metric)} yet</i></div>"
    xs = [p[0] for points in series.values() for p in points]
    ys = [p[1] for points in series.values() for p in points]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    y0, y1 = chart_range(ys)
    m = CHART_MARGIN
    width, height = CHART_WIDTH, CHART_HEIGHT
    inner_w, inner_h = width - m["left"] - m["right"], height - m["top"] - m["bottom"]

    def sx(x: float) -> float:
        return m["left"] + (x - x0) / (x1 - x0) * inner_w

    def sy(y: float) -> float:
        return m["top"] + (y1 - y) / (y1 - y0) * inner_h

    parts = []
    for tick in nice_ticks(y0, y1):
        y = sy(tick)
        parts.append(
            f"<line x1='{m['left']}' x2='{width - m['right']}' y1='{y:.1f}' y2='{y:.1f}' "
            "stroke='currentColor' stroke-opacity='0.12'/>"
            f"<text x='{m['left'] - 6}' y='{y + 3:.1f}' text-anchor='end' "
            f"font-size='10' fill='currentColor'>{_esc(format_number(tick))}</text>"
        )
    for tick in nice_ticks(x0, x1, 6):
        x = sx(tick)
        parts.append(
            f"<text x='{x:.1f}' y='{height - m['bottom'] + 14}' text-anchor='middle' "
            f"font-size='10' fill='currentColor'>{_esc(format_number(tick))}</text>"
        )
    parts.append(
        f"<line x1='{m['left']}' y1='{height - m['bottom']}' x2='{width - m['right']}' "
        f"y2='{height - m['bottom']}' stroke='currentColor' stroke-opacity='0.5'/>"
        f"<text x='{m['left'] + inner_w / 2:.0f}' y='{height - 4}' text-anchor='middle' "
        f"font-size='10' fill='currentColor'>steps</text>"
    )
    legend = []
    ordered = sorted(series.items(), key=lambda item: int(item[0]) if item[0].isdigit() else 0)
    for index, (key, points) in enumerate(ordered):
        color = COLORS[index % len(COLORS)]
        best = key == best_trial
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        parts.append(
            f"<polyline class='det-curve' data-trial='{_esc(key)}' fill='none' "
            f"stroke='{color}' stroke-width='{3 if best else 1.5}' points='{coords}'>"
            f"<title>trial {_esc(key)}</title></polyline>"
        )
        if len(points) <= SPARSE_SERIES_POINTS:  # markers where lines alone hide the data
            parts.extend(
                f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='{3.5 if best else 2.5}' "
                f"fill='{color}'><title>trial {_esc(key)} · step {format_number(x)} · "
                f"{_esc(metric)} {_esc(format_number(y))}</title></circle>"
                for x, y in points
            )
        legend.append(
            f"<span style='white-space:nowrap;margin-right:10px;"
            f"{'font-weight:bold' if best else ''}'><span style='display:inline-block;"
            f"width:10px;height:3px;background:{color};vertical-align:middle;"
            f"margin-right:4px'></span>trial {_esc(key)}{' (best)' if best else ''}"
            "</span>"
        )
    svg = (
        f"<svg class='det-chart' viewBox='0 0 {width} {height}' width='100%' "
        f"style='max-width:{width * 1.5:.0f}px;display:block' "
        f"xmlns='http://www.w3.org/2000/svg' role='img'>"
        f"<title>{_esc(title)} {_esc(metric)} by steps</title>{''.join(parts)}</svg>"
    )
    return (
        f"<div class='det-chart-box' style='margin:6px 0'><div style='font-size:12px'>"
        f"{_esc(title)} {_esc(metric)}</div>{svg}<div class='det-legend' "
        f"style='font-size:11px'>{''.join(legend)}</div></div>"
    )


def _curves(metrics: list[dict], group: str, metric: str) -> dict[str, list[list[float]]]:
    curves: dict[str, list[list[float]]] = {}
    for report in metrics:
        value = (report.get("metrics") or {}).get(metric)
        if (
            report.get("group") != group
            or isinstance(value, bool)
            or not isinstance(value, (int, float))
        ):
            continue
        point = [float(report.get("steps_completed") or 0), float(value)]
        series = curves.setdefault(str(report.get("trial_id")), [])
        if point not in series:
            series.append(point)
    return curves


def best_trial_id(trials: list[dict], metric: str, smaller_is_better: bool) -> str | None:
    """The id (str) of the trial with the best validation of `metric`, or None."""
    scored = [
        (value, str(trial.get("id")))
        for trial in trials
        if isinstance(value := _metric_of(trial, "best_validation", metric), (int, float))
    ]
    if not scored:
        return None
    return (min if smaller_is_better else max)(scored)[1]


def top_trials(trials: list[dict], metric: str, smaller_is_better: bool, limit: int) -> list[dict]:
    """The `limit` trials with the best validation of `metric` (then the rest by id), by id."""

    def rank(trial: dict) -> tuple:
        value = _metric_of(trial, "best_validation", metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return (1, 0.0, trial.get("id") or 0)
        return (0, value if smaller_is_better else -value, trial.get("id") or 0)

    chosen = sorted(trials, key=rank)[:limit]
    return sorted(chosen, key=lambda trial: trial.get("id") or 0)


def snapshot_html(snapshot: dict) -> str:
    """The snapshot as self-contained HTML (no scripts), readable in light and dark pages."""
    experiment = snapshot.get("experiment") or {}
    trials = snapshot.get("trials") or []
    searcher = experiment.get("searcher") or {}
    metric = str(searcher.get("metric") or "metric")
    smaller = bool(searcher.get("smaller_is_better", True))
    state = str(experiment.get("state") or "unknown")
    progress = 1.0 if state == "COMPLETED" else float(experiment.get("progress") or 0.0)
    color = STATE_COLORS.get(state, "#4e79a7")
    best = best_trial_id(trials, metric, smaller)
    shown = top_trials(trials, metric, smaller, HTML_MAX_TRIALS)
    plotted = {
        str(trial.get("id")) for trial in top_trials(trials, metric, smaller, HTML_MAX_SERIES)
    }
    metrics = snapshot.get("metrics") or []
    charts = ""
    for group in ("validation", "training"):
        curves = {
            key: points for key, points in _curves(metrics, group, metric).items() if key in plotted
        }
        if curves or group == "validation":
            charts += render_curve_svg(curves, metric, best, title=group)
    more = len(trials) - len(shown)
    table = render_trials_table(shown, metric) + (
        f"<div style='font-size:11px;opacity:0.7'>{more} more trials (best {len(shown)} shown; "
        f"curves of the best {len(plotted)})</div>"
        if more > 0
        else ""
    )
    logs = "\n".join(
        f"[trial {line.get('trial_id')}] {cut_line(str(line.get('line', '')))}"
        for line in snapshot.get("logs") or []
    )
    taken = _esc(snapshot.get("taken_at") or "")
    bar = (
        f"<div style='height:6px;background:rgba(127,127,127,0.25);border-radius:3px;"
        f"margin:4px 0;max-width:640px'><div style='height:6px;border-radius:3px;"
        f"width:{max(0.0, min(1.0, progress)) * 100:.0f}%;background:{color}'></div></div>"
    )
    return (
        f"<div class='det-experiment-snapshot' data-experiment-id='{_esc(experiment.get('id'))}'"
        f" style='font-size:13px'>"
        f"<div><b>Experiment {_esc(experiment.get('id'))}</b> {_esc(experiment.get('name'))} — "
        f"<span class='det-state' style='color:{color};font-weight:bold'>{_esc(state)}</span>"
        f" · {progress:.0%} · best {_esc(metric)} "
        f"{_esc(format_number(experiment.get('best_validation')))}</div>{bar}"
        f"{table}{charts}"
        + (
            f"<pre class='det-logs' style='font-size:11px;max-height:12em;overflow:auto;"
            f"margin:4px 0'>{_esc(logs)}</pre>"
            if logs
            else ""
        )
        + f"<div style='font-size:11px;opacity:0.7'>snapshot taken {taken}</div></div>"
    )


def snapshot_text(snapshot: dict) -> str:
    """The snapshot as plain text: the experiment's line, then one line per trial."""
    experiment = snapshot.get("experiment") or {}
    metric = str((experiment.get("searcher") or {}).get("metric") or "metric")
    state = str(experiment.get("state") or "unknown")
    progress = 1.0 if state == "COMPLETED" else float(experiment.get("progress") or 0.0)
    lines = [
        f"Experiment {experiment.get('id')} {experiment.get('name') or ''}: {state} "
        f"({progress:.0%})"
    ]
    for trial in snapshot.get("trials") or []:
        lines.append(
            f"  trial {trial.get('id')} {display_state(trial)} "
            f"steps={trial.get('steps_completed', 0)} best {metric}="
            f"{format_number(_metric_of(trial, 'best_validation', metric))}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The kernel side


class ExperimentWidget:
    """The widget of one experiment under the running cell (see the module docstring).

    `snapshot` is what the output carries: `{"experiment", "trials", "metrics", "logs",
    "taken_at"}` as the master's API answers them. `load()` refreshes it; `show()` displays
    it; `follow()` keeps it current from a background thread until the experiment ends.
    """

    def __init__(self, experiment_id: int, *, session: Any = None) -> None:
        self.experiment_id = int(experiment_id)
        self.session = session
        self.snapshot: dict = {
            "experiment": {"id": self.experiment_id},
            "trials": [],
            "metrics": [],
            "logs": [],
            "taken_at": None,
        }
        self.error = ""
        self._display_id = f"det-experiment-{experiment_id}-{uuid.uuid4().hex[:8]}"
        self._displayed = False
        self._follower: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    # --- state ----------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return str(self.snapshot["experiment"].get("state") or "")

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    @property
    def metric(self) -> str:
        return str((self.snapshot["experiment"].get("searcher") or {}).get("metric") or "")

    def curves(self, group: str = "validation") -> dict[str, list[list[float]]]:
        """trial id (str) -> [[steps, value], ...] of `group` reports of the searcher metric."""
        return _curves(self.snapshot["metrics"], group, self.metric)

    # --- talking to the master ------------------------------------------------------------------

    def _session(self) -> Any:
        if self.session is None:
            from determined.common.api import Session, discover_master

            address = discover_master()
            # A widget must not hang a notebook on a master that went away: short timeouts.
            self.session = Session(address.url, address.token, timeout=10.0, connect_retries=1)
        return self.session

    def load(self) -> dict:
        """Fetch the whole snapshot (experiment, trials, downsampled curves, latest logs)."""
        session = self._session()
        answer = session.get(f"/experiments/{self.experiment_id}")
        trials = list(answer.get("trials") or [])
        per_trial = curve_points_per_trial(len(trials))
        metrics: list[dict] = []
        for group in ("validation", "training"):
            metrics.extend(
                session.get(
                    f"/experiments/{self.experiment_id}/metrics",
                    params={"group": group, "max_datapoints": per_trial},
                ).get("metrics", [])
            )
        logs: list[dict] = []
        for trial in sorted(trials, key=lambda t: t["id"])[-LOG_TAIL_TRIALS:]:
            for line in session.get(
                f"/trials/{trial['id']}/logs", params={"tail": LOG_TAIL_LINES}
            ).get("logs", []):
                logs.append({**line, "line": cut_line(str(line.get("line", "")))})
        snapshot = {
            "experiment": answer["experiment"],
            "trials": trials,
            "metrics": metrics,
            "logs": logs,
            "taken_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        with self._lock:
            self.snapshot = snapshot
        return snapshot

    def use_in_notebook(self, uuid: str | None = None) -> str:
        """Make the cell that downloads and loads a checkpoint the notebook's next cell (the
        button of the same name in JupyterLab's widget does it there); default the
        experiment's best checkpoint. Returns the checkpoint's uuid."""
        from jupyter_determined.kernel._use import best_checkpoint_uuid, insert_checkpoint_cell

        session = self._session()
        uuid = uuid or best_checkpoint_uuid(session, self.experiment_id)
        insert_checkpoint_cell(session, uuid)
        return uuid

    def action(self, name: str) -> dict:
        """pause | activate | kill through the API (the browser's buttons do the same)."""
        experiment = self._session().post(f"/experiments/{self.experiment_id}/{name}")
        return experiment.get("experiment", experiment)

    # --- display --------------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        with self._lock:
            snapshot = self.snapshot
        return {
            MIME_TYPE: {"experiment_id": self.experiment_id, "snapshot": snapshot},
            "text/html": snapshot_html(snapshot),
            "text/plain": snapshot_text(snapshot),
        }

    def show(self) -> ExperimentWidget:
        """Display under the running cell; later snapshots update this same output."""
        from IPython.display import display

        display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)
        self._displayed = True
        return self

    def refresh_display(self) -> None:
        """Replace the displayed output with the current snapshot (no-op when not displayed)."""
        if not self._displayed:
            return
        try:
            from IPython.display import update_display

            update_display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)
        except Exception:  # a closed kernel channel must not kill the follower
            log.debug("could not refresh the experiment snapshot", exc_info=True)

    # --- following ------------------------------------------------------------------------------

    def follow(self) -> ExperimentWidget:
        """Start the background thread that keeps the snapshot current (returns at once)."""
        if self._follower is not None and self._follower.is_alive():
            return self
        self._stop.clear()
        self._follower = threading.Thread(
            target=self._follow, daemon=True, name=f"det-widget-{self.experiment_id}"
        )
        self._follower.start()
        return self

    def _follow(self, clock: Callable[[], float] | None = None) -> None:
        import time

        clock = clock or time.monotonic
        seen: tuple | None = None
        last_reload = -math.inf
        delay = POLL_SECONDS
        while not self._stop.is_set():
            try:
                answer = self._session().get(f"/experiments/{self.experiment_id}")
                experiment = answer["experiment"]
                # What a person sees change: state, progress, trials and their states/steps.
                now_seen = (
                    experiment.get("state"),
                    round(float(experiment.get("progress") or 0), 3),
                    tuple(
                        (t["id"], t.get("state"), t.get("run_state"), t.get("steps_completed"))
                        for t in answer.get("trials") or []
                    ),
                )
                finished = str(experiment.get("state")) in TERMINAL
                if now_seen != seen and (
                    finished or seen is None or clock() - last_reload >= RELOAD_SECONDS
                ):
                    self.load()
                    self.refresh_display()
                    seen, last_reload = now_seen, clock()
                if finished:
                    return
                self.error = ""
                delay = POLL_SECONDS
            except Exception as exc:
                self.error = f"cannot reach the master: {exc}"
                log.debug("experiment %s: poll failed: %s", self.experiment_id, exc)
                delay = min(delay * 2, 10.0)
            if self._stop.wait(delay):
                return

    def stop_following(self) -> None:
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the follower has written the final snapshot; True when it has."""
        if self._follower is None:
            return self.finished
        self._follower.join(timeout)
        return self.finished


def show_experiment(
    experiment_id: int, *, session: Any = None, follow: bool = True, display: bool = True
) -> ExperimentWidget:
    """The live widget of one experiment, displayed under the running cell.

    Args:
        experiment_id: the experiment to show.
        session: a `determined.common.api.Session`; by default the master is discovered
            (DET_MASTER, master.json) as the `det` CLI does.
        follow: keep the output's snapshot current until the experiment ends.
        display: display it now (False: only build it).
    """
    widget = ExperimentWidget(int(experiment_id), session=session)
    if follow or display:
        try:
            widget.load()
        except Exception as exc:  # still show the live view: the browser may reach the master
            widget.error = f"cannot load experiment {experiment_id}: {exc}"
            log.debug("experiment %s: first load failed", experiment_id, exc_info=True)
    if display:
        widget.show()
    if follow:
        widget.follow()
    return widget


__all__ = [
    "ExperimentWidget",
    "MIME_TYPE",
    "best_trial_id",
    "chart_range",
    "cut_line",
    "format_number",
    "nice_ticks",
    "render_curve_svg",
    "render_trials_table",
    "show_experiment",
    "snapshot_html",
    "snapshot_text",
    "thin",
    "top_trials",
]
