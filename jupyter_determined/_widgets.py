"""The live experiment widget: state as traitlets, fed by the master's event stream.

`ExperimentWidget` holds everything it shows in traitlets (experiment name and state, searcher
progress, trials, learning curves, latest log lines) and renders them as HTML children (a
table, an SVG chart), so it needs no custom frontend code. `apply_event(type, payload)` is
the one way state changes: the background follower feeds it from `Session.events`, tests
feed it directly. The displayed output also carries a `text/html` snapshot, refreshed when the
experiment changes, so a saved notebook stays readable where widgets do not render.
"""
from __future__ import annotations

import html
import logging
import threading
import uuid
from typing import Any

import ipywidgets as widgets
from traitlets import Dict, Float, Int, List, Unicode, observe

from determined.common.states import TERMINAL_EXPERIMENT_STATES

log = logging.getLogger("jupyter_determined.widgets")

MAX_LOG_LINES = 12
# The chart is CHART_WIDTH pixels wide: a few thousand points in all are plenty, so a large
# experiment's curves are downsampled by the master (the first, last and evenly spaced
# validations of each trial) instead of fetching every report.
CURVE_POINTS_TOTAL = 5000
CURVE_POINTS_PER_TRIAL = (10, 500)  # bounds per trial
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 420, 180, 34
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")
TERMINAL = {str(state) for state in TERMINAL_EXPERIMENT_STATES}


def curve_points_per_trial(num_trials: int) -> int:
    """`max_datapoints` for the validation curves of `num_trials` trials."""
    low, high = CURVE_POINTS_PER_TRIAL
    return max(low, min(high, CURVE_POINTS_TOTAL // max(1, num_trials)))


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _format_number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return _esc(value)


def _hparams_text(hparams: dict) -> str:
    return ", ".join(f"{key}={_format_number(value)}" for key, value in sorted(hparams.items()))


def render_trials_table(trials: list[dict], metric: str) -> str:
    if not trials:
        return "<div><i>no trials yet</i></div>"
    rows = []
    for trial in trials:
        rows.append(
            "<tr>" + "".join(f"<td style='padding:2px 8px'>{cell}</td>" for cell in (
                _esc(trial.get("id")), _esc(trial.get("state")),
                _esc(_hparams_text(trial.get("hparams") or {})),
                _esc(trial.get("steps_completed", 0)),
                _format_number(trial.get("latest_metric")),
                _format_number(trial.get("best_metric")))) + "</tr>")
    header = "".join(f"<th style='padding:2px 8px;text-align:left'>{name}</th>" for name in (
        "trial", "state", "hyperparameters", "steps", f"latest {_esc(metric)}",
        f"best {_esc(metric)}"))
    return (f"<table class='det-trials' style='border-collapse:collapse'><thead><tr>{header}"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def render_curve_svg(curves: dict[str, list[list[float]]], metric: str) -> str:
    """An SVG line chart: one polyline per trial, steps on x, the searcher metric on y."""
    points = [point for series in curves.values() for point in series]
    if not points:
        return f"<div><i>no validation {_esc(metric)} yet</i></div>"
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    inner_w = CHART_WIDTH - 2 * CHART_PAD
    inner_h = CHART_HEIGHT - 2 * CHART_PAD

    def xy(point: list[float]) -> str:
        x = CHART_PAD + (point[0] - x0) / (x1 - x0) * inner_w
        y = CHART_HEIGHT - CHART_PAD - (point[1] - y0) / (y1 - y0) * inner_h
        return f"{x:.1f},{y:.1f}"

    lines = []
    for index, (trial_id, series) in enumerate(sorted(curves.items(), key=lambda kv: int(kv[0]))):
        color = COLORS[index % len(COLORS)]
        ordered = sorted(series)
        coords = " ".join(xy(point) for point in ordered)
        lines.append(f"<polyline class='det-curve' data-trial='{_esc(trial_id)}' fill='none' "
                     f"stroke='{color}' stroke-width='1.5' points='{coords}'/>")
        for point in ordered:
            x, y = xy(point).split(",")
            lines.append(f"<circle cx='{x}' cy='{y}' r='2' fill='{color}'/>")
        lines.append(f"<text x='{CHART_WIDTH - CHART_PAD + 4}' y='{12 + 12 * index}' "
                     f"font-size='10' fill='{color}'>trial {_esc(trial_id)}</text>")
    axes = (f"<line x1='{CHART_PAD}' y1='{CHART_HEIGHT - CHART_PAD}' x2='{CHART_WIDTH - CHART_PAD}'"
            f" y2='{CHART_HEIGHT - CHART_PAD}' stroke='#888'/>"
            f"<line x1='{CHART_PAD}' y1='{CHART_PAD}' x2='{CHART_PAD}' "
            f"y2='{CHART_HEIGHT - CHART_PAD}' stroke='#888'/>"
            f"<text x='2' y='{CHART_PAD}' font-size='10'>{_format_number(y1)}</text>"
            f"<text x='2' y='{CHART_HEIGHT - CHART_PAD}' font-size='10'>{_format_number(y0)}</text>"
            f"<text x='{CHART_PAD}' y='{CHART_HEIGHT - 18}' font-size='10'>{_format_number(x0)}</text>"
            f"<text x='{CHART_WIDTH - CHART_PAD - 20}' y='{CHART_HEIGHT - 18}' font-size='10'>"
            f"{_format_number(x1)}</text>"
            f"<text x='{CHART_WIDTH / 2 - 40}' y='{CHART_HEIGHT - 4}' font-size='10'>"
            f"steps · validation {_esc(metric)}</text>")
    return (f"<svg class='det-chart' width='{CHART_WIDTH + 60}' height='{CHART_HEIGHT}' "
            f"xmlns='http://www.w3.org/2000/svg'>{axes}{''.join(lines)}</svg>")


class ExperimentWidget(widgets.VBox):
    """Live view of one experiment: header, progress, trials, learning curves, logs, actions."""

    experiment_id = Int(0).tag(sync=True)
    experiment_name = Unicode("").tag(sync=True)
    state = Unicode("").tag(sync=True)
    progress = Float(0.0).tag(sync=True)
    metric = Unicode("").tag(sync=True)
    smaller_is_better = Int(1).tag(sync=True)
    # trial id (str) -> {id, state, hparams, steps_completed, latest_metric, best_metric}
    trials = Dict().tag(sync=True)
    # trial id (str) -> [[steps, value], ...] of validation reports of the searcher metric
    curves = Dict().tag(sync=True)
    log_lines = List(Unicode()).tag(sync=True)
    error = Unicode("").tag(sync=True)

    def __init__(self, experiment_id: int, *, session: Any = None, **kwargs: Any) -> None:
        self._header = widgets.HTML()
        self._progress_bar = widgets.FloatProgress(min=0.0, max=1.0, description="searcher")
        self._table = widgets.HTML()
        self._chart = widgets.HTML()
        self._logs = widgets.HTML()
        self.pause_button = widgets.Button(description="Pause", icon="pause")
        self.activate_button = widgets.Button(description="Activate", icon="play")
        self.kill_button = widgets.Button(description="Kill", icon="stop", button_style="danger")
        buttons = widgets.HBox([self.pause_button, self.activate_button, self.kill_button])
        super().__init__(children=[self._header, self._progress_bar, buttons, self._table,
                                   self._chart, self._logs], **kwargs)
        self.experiment_id = experiment_id
        self.session = session
        self.pause_button.on_click(lambda _: self.action("pause"))
        self.activate_button.on_click(lambda _: self.action("activate"))
        self.kill_button.on_click(lambda _: self.action("kill"))
        self._lock = threading.RLock()
        self._trial_ids: set[int] = set()
        self._follower: threading.Thread | None = None
        self._stop = threading.Event()
        self._display_id = f"det-experiment-{experiment_id}-{uuid.uuid4().hex[:8]}"
        self._displayed = False
        self._render_all()

    # --- state changes --------------------------------------------------------------------------

    def apply_experiment(self, experiment: dict) -> None:
        with self._lock:
            self.experiment_name = str(experiment.get("name") or "")
            searcher = experiment.get("searcher") or {}
            if searcher.get("metric"):
                self.metric = str(searcher["metric"])
            self.smaller_is_better = int(bool(searcher.get("smaller_is_better", True)))
            self.progress = float(experiment.get("progress") or 0.0)
            changed = self.state != str(experiment.get("state") or "")
            self.state = str(experiment.get("state") or "")
        if changed:
            self.refresh_snapshot()

    def apply_trial(self, trial: dict) -> None:
        with self._lock:
            key = str(trial["id"])
            self._trial_ids.add(int(trial["id"]))
            row = dict(self.trials.get(key) or {})
            row.update({"id": trial["id"], "state": trial.get("state"),
                        "hparams": trial.get("hparams") or {},
                        "steps_completed": trial.get("steps_completed") or 0})
            latest = (trial.get("latest_validation") or {}).get("metrics") or {}
            if self.metric in latest:
                row["latest_metric"] = latest[self.metric]
            best = (trial.get("best_validation") or {}).get("metrics") or {}
            if self.metric in best:
                row["best_metric"] = best[self.metric]
            self.trials = {**self.trials, key: row}

    def apply_metric(self, report: dict) -> None:
        if report.get("group") != "validation":
            return
        value = (report.get("metrics") or {}).get(self.metric)
        if not isinstance(value, (int, float)):
            return
        with self._lock:
            key = str(report["trial_id"])
            series = list(self.curves.get(key) or [])
            point = [float(report.get("steps_completed") or 0), float(value)]
            if point not in series:
                series.append(point)
            self.curves = {**self.curves, key: series}
            row = dict(self.trials.get(key) or {"id": report["trial_id"], "hparams": {}})
            row["latest_metric"] = value
            best = row.get("best_metric")
            better = min if self.smaller_is_better else max
            row["best_metric"] = value if best is None else better(best, value)
            self.trials = {**self.trials, key: row}

    def apply_log(self, line: dict) -> None:
        with self._lock:
            text = f"[trial {line.get('trial_id')}] {str(line.get('line', '')).rstrip()}"
            self.log_lines = (list(self.log_lines) + [text])[-MAX_LOG_LINES:]

    def apply_event(self, event_type: str, payload: dict) -> None:
        """One event of the master's stream (`GET /events`)."""
        if event_type == "experiment":
            self.apply_experiment(payload)
        elif event_type == "trial":
            self.apply_trial(payload)
        elif event_type == "metric":
            self.apply_metric(payload)
        elif event_type == "log":
            self.apply_log(payload)

    def concerns(self, event_type: str, payload: dict) -> bool:
        """Whether an event of the master's whole stream is about this experiment.

        The stream is not filtered by experiment on the server: its `experiment_id` filter
        drops metric and log events, which carry only a trial id. Trial events come first
        (a trial is announced before it runs), so its metrics and logs are recognised."""
        if event_type == "experiment":
            return payload.get("id") == self.experiment_id
        if payload.get("experiment_id") is not None:
            return payload.get("experiment_id") == self.experiment_id
        return payload.get("trial_id") in self._trial_ids

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    # --- rendering ------------------------------------------------------------------------------

    @observe("experiment_name", "state", "experiment_id", "error")
    def _render_header(self, _: Any = None) -> None:
        state_color = {"COMPLETED": "green", "ERROR": "red", "CANCELED": "gray",
                       "PAUSED": "orange"}.get(self.state, "#1f77b4")
        error = f" <span style='color:red'>{_esc(self.error)}</span>" if self.error else ""
        self._header.value = (f"<b>Experiment {self.experiment_id}</b> {_esc(self.experiment_name)}"
                              f" — <span class='det-state' style='color:{state_color}'>"
                              f"{_esc(self.state or 'loading')}</span>{error}")
        finished = self.finished
        self.pause_button.disabled = finished or self.state == "PAUSED"
        self.activate_button.disabled = finished or self.state != "PAUSED"
        self.kill_button.disabled = finished

    @observe("progress")
    def _render_progress(self, _: Any = None) -> None:
        self._progress_bar.value = max(0.0, min(1.0, self.progress))
        self._progress_bar.description = f"{self.progress:.0%}"

    @observe("trials", "metric")
    def _render_table(self, _: Any = None) -> None:
        rows = [self.trials[key] for key in sorted(self.trials, key=int)]
        self._table.value = render_trials_table(rows, self.metric or "metric")

    @observe("curves", "metric")
    def _render_chart(self, _: Any = None) -> None:
        self._chart.value = render_curve_svg(self.curves, self.metric or "metric")

    @observe("log_lines")
    def _render_logs(self, _: Any = None) -> None:
        text = "\n".join(self.log_lines)
        self._logs.value = (f"<pre class='det-logs' style='font-size:11px;max-height:14em;"
                            f"overflow:auto;margin:0'>{_esc(text)}</pre>")

    def _render_all(self) -> None:
        self._render_header()
        self._render_progress()
        self._render_table()
        self._render_chart()
        self._render_logs()

    def snapshot_html(self) -> str:
        """A static, self-contained view for saved notebooks and non-widget renderers."""
        return (f"<div class='det-experiment-snapshot'>{self._header.value}<br>"
                f"searcher progress: {self.progress:.0%}{self._table.value}{self._chart.value}"
                f"{self._logs.value}</div>")

    def snapshot_text(self) -> str:
        lines = [f"Experiment {self.experiment_id} {self.experiment_name}: {self.state} "
                 f"({self.progress:.0%})"]
        for key in sorted(self.trials, key=int):
            trial = self.trials[key]
            lines.append(f"  trial {trial.get('id')} {trial.get('state')} steps="
                         f"{trial.get('steps_completed', 0)} best {self.metric}="
                         f"{trial.get('best_metric')}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = self.snapshot_text()
        bundle["text/html"] = self.snapshot_html()
        return bundle

    def show(self) -> "ExperimentWidget":
        """Display under the running cell; later snapshots update this same output."""
        from IPython.display import display

        display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)
        self._displayed = True
        return self

    def refresh_snapshot(self) -> None:
        if not self._displayed:
            return
        try:
            from IPython.display import update_display

            update_display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)
        except Exception:  # a closed kernel channel must not kill the follower
            log.debug("could not refresh the experiment snapshot", exc_info=True)

    # --- talking to the master ------------------------------------------------------------------

    def _session(self) -> Any:
        if self.session is None:
            from determined.common.api import Session, discover_master

            address = discover_master()
            self.session = Session(address.url, address.token)
        return self.session

    def action(self, name: str) -> None:
        """pause | activate | kill, through the API; the event stream brings the new state."""
        try:
            experiment = self._session().post(f"/experiments/{self.experiment_id}/{name}")
            self.apply_experiment(experiment.get("experiment", experiment))
            self.error = ""
        except Exception as exc:
            self.error = f"{name} failed: {exc}"

    def load(self) -> None:
        """Fetch the current state (used first, and after a reconnect)."""
        session = self._session()
        answer = session.get(f"/experiments/{self.experiment_id}")
        self.apply_experiment(answer["experiment"])
        for trial in answer.get("trials", []):
            self.apply_trial(trial)
        metrics = session.get(f"/experiments/{self.experiment_id}/metrics", params={
            "group": "validation",
            "max_datapoints": curve_points_per_trial(len(answer.get("trials", [])))},
        ).get("metrics", [])
        for report in metrics:
            self.apply_metric(report)
        for trial in answer.get("trials", [])[-3:]:
            for line in session.get(f"/trials/{trial['id']}/logs",
                                    params={"tail": 4}).get("logs", []):
                self.apply_log(line)

    def follow(self) -> "ExperimentWidget":
        """Start the background thread that applies the event stream (returns at once)."""
        if self._follower is not None and self._follower.is_alive():
            return self
        self._stop.clear()
        self._follower = threading.Thread(target=self._follow, daemon=True,
                                          name=f"det-widget-{self.experiment_id}")
        self._follower.start()
        return self

    def _follow(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                self.load()
                if self.finished:
                    break
                params = {"types": "experiment,trial,metric,log"}
                for event_type, payload in self._session().events(params):
                    if self._stop.is_set():
                        return
                    if not self.concerns(event_type, payload):
                        continue
                    self.apply_event(event_type, payload)
                    if event_type == "experiment" and self.finished:
                        break
                    delay = 0.5
                if self.finished:
                    self.load()  # the last reports and log lines
                    break
            except Exception as exc:
                log.debug("experiment %s: event stream failed: %s", self.experiment_id, exc)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, 10.0)
        self.refresh_snapshot()

    def stop_following(self) -> None:
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the follower has seen the experiment finish; True when it has."""
        if self._follower is None:
            return self.finished
        self._follower.join(timeout)
        return self.finished


def show_experiment(experiment_id: int, *, session: Any = None, follow: bool = True,
                    display: bool = True) -> ExperimentWidget:
    """The live widget of one experiment, displayed under the running cell."""
    widget = ExperimentWidget(int(experiment_id), session=session)
    if display:
        widget.show()
    if follow:
        widget.follow()
    return widget


__all__ = ["ExperimentWidget", "render_curve_svg", "render_trials_table", "show_experiment"]
