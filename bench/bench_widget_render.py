"""The experiment widget under a notebook cell, in Chromium: first paint of an experiment with
100 trials x 1,000 training and 1,000 validation reports each, and the paint of its learning
curves.

Workload (a real `jupyter lab` with the built labextension, Debian's Chromium via Playwright;
the API answers are synthetic, served by Playwright's request interception and downsampled the
way master-lite does (first, last and evenly spaced reports), so the numbers measure the
frontend and not the master). The output is the bundle `jupyter_determined.kernel._widget` writes:
`application/vnd.determined.experiment+json` with `{experiment_id, snapshot}` (the snapshot holds
the experiment, the 100 trials and 50 reports per trial and group, as the kernel downsamples
it), plus its `text/html` and `text/plain` fallbacks. The experiment is COMPLETED (a finished
run, as a saved notebook shows it).

1. **first paint**: the output is added to an open notebook's cell model (what JupyterLab does
   when a kernel displays it: the output area picks the MIME renderer and renders it). Measured:
   from `outputs.add` until the widget's header (experiment name) and all 100 trial rows of its
   Trials table (the section it opens on) are in the DOM, laid out, and a frame was painted.
   Ideal: the same header and a 100-row table of the same columns built with bare
   `createElement`/`textContent` in the same page, laid out, and a frame painted: no data
   handling and no framework, the least any DOM table can cost.
2. **curves**: once the API's curves have arrived (the 8 default plotted trials, 1,000 reports
   per trial and group), a click on the widget's "Learning curves" tab. Measured: from the
   click until both charts (training and validation) report 8,000 drawn points
   (`data-points`, see labextension/src/chart/chart.ts), have a canvas, and a frame was painted.
   Ideal: two canvases with 8 paths of 1,000 points each stroked directly with the 2D API,
   then a frame: the raw drawing cost with no chart library.
3. **output -> curves** (end to end): the output is added and "Learning curves" is clicked as
   soon as the header and table are there; measured until both charts show the full 8,000
   points each and a frame was painted. This includes the synthetic API answers' trips through
   Playwright (their arrival time is printed). Ideal: the sum of the two ideals above.
4. **saved notebook** (reference): `docmanager:open` of a saved notebook holding that output,
   until the widget's header and 100 rows are painted; baseline: the same notebook without the
   widget's MIME type (what JupyterLab shows without the extension: the `text/html` snapshot),
   until its 100 table rows are painted. Their ratio is the extension's cost on opening.
5. **diagnostic**: scenario 3 with an output that lacks the `text/html` fallback, alternating
   with scenario 3 (JupyterLab's table of contents sanitizes every `text/html` output of the
   notebook 200 ms after each change; with 100 trials the fallback is ~0.75 MB of HTML + SVG).
   Also printed: the main-thread long tasks (> 50 ms) of both.

Target: scenarios 1-3 each under 1 s (median). Prints measured, ideal, ratio (measured / ideal),
median and spread of the repeats, and writes its section of bench/RESULTS.md.
Run: `.venv/bin/python bench/bench_widget_render.py` (needs /usr/bin/chromium, playwright from
PyPI, and the labextension built: `cd labextension && jlpm install && jlpm build`). Knobs:
`BENCH_REPEATS` [3], `BENCH_WIDGET_TRIALS` [100], `BENCH_WIDGET_POINTS` [1000].
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import sys
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from _common import record  # noqa: E402  (also puts harness/ and the repository on sys.path)
from bench_sidebar_render import _browser_test_support, json_answer

from jupyter_determined.kernel._snapshot import HTML_MAX_TRIALS
from jupyter_determined.kernel._widget import (
    MIME_TYPE,
    curve_points_per_trial,
    snapshot_html,
    snapshot_text,
)

N_TRIALS = int(os.environ.get("BENCH_WIDGET_TRIALS", "100"))
N_POINTS = int(os.environ.get("BENCH_WIDGET_POINTS", "1000"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
TARGET_SECONDS = 1.0
EXPERIMENT_ID = 1
# What the view asks for (labextension/src/views/experimentView.ts): the 8 best trials, at most
# 1,000 reports per trial and group.
PLOTTED_TRIALS = 8
CURVE_POINTS = 1000
HPARAMS = ("lr", "layers", "dropout", "optimizer")
TIME = "2026-11-22T01:02:03.456Z"


# -- synthetic experiment ---------------------------------------------------------------------
def evenly_spaced_positions(n: int, m: int) -> range | list[int]:
    """master_lite.store._queries.evenly_spaced_positions: the reports a downsampled series keeps."""
    if n <= m:
        return range(n)
    return [k * (n - 1) // (m - 1) for k in range(m)]


def training_loss(trial: int, step: int) -> float:
    return round(0.05 + (1 + trial % 13) / (1 + step / 40) + (step % 7) * 1e-3, 6)


def validation_loss(trial: int, step: int) -> float:
    return round(0.08 + (1 + trial % 13) / (1 + step / 45) + (trial % 5) * 1e-3, 6)


def report(report_id: int, trial: int, group: str, step: int) -> dict:
    metrics = (
        {"loss": training_loss(trial, step)}
        if group == "training"
        else {
            "validation_loss": validation_loss(trial, step),
            "accuracy": round(1 - validation_loss(trial, step) / 20, 6),
        }
    )
    return {
        "id": report_id,
        "trial_id": trial,
        "trial_run_id": 1,
        "group": group,
        "steps_completed": step,
        "metrics": metrics,
        "report_time": TIME,
    }


def synthetic_experiment(n_trials: int, n_points: int) -> dict:
    """The experiment, its trials and every report (by trial and group), as the API shows them."""
    experiment = {
        "id": EXPERIMENT_ID,
        "name": f"widget bench: {n_trials} trials",
        "description": "",
        "labels": [],
        "state": "COMPLETED",
        "archived": False,
        "progress": 1.0,
        "start_time": TIME,
        "end_time": "2026-11-22T03:04:05.678Z",
        "searcher": {"name": "random", "metric": "validation_loss", "smaller_is_better": True},
        "num_trials": n_trials,
        "best_validation": None,
        "context_hash": None,
        "notebook": "bench.ipynb",
        "parent_id": None,
        "config": {
            "name": f"widget bench: {n_trials} trials",
            "entrypoint": "python train.py",
            "searcher": {
                "name": "random",
                "metric": "validation_loss",
                "smaller_is_better": True,
                "max_trials": n_trials,
                "max_length": n_points,
            },
            "hyperparameters": {
                "lr": {"type": "log", "minval": -5, "maxval": -1, "base": 10},
                "layers": {"type": "int", "minval": 1, "maxval": 8},
                "dropout": {"type": "double", "minval": 0, "maxval": 0.5},
                "optimizer": {"type": "categorical", "vals": ["adam", "sgd"]},
            },
        },
    }
    trials, reports = [], {}
    for t in range(1, n_trials + 1):
        series = {"training": [], "validation": []}
        for step in range(1, n_points + 1):
            base = ((t - 1) * n_points + (step - 1)) * 2 + 1  # training, then validation, per step
            series["training"].append(report(base, t, "training", step))
            series["validation"].append(report(base + 1, t, "validation", step))
        reports[t] = series
        best = min(series["validation"], key=lambda r: r["metrics"]["validation_loss"])

        def summary(r: dict) -> dict:
            return {
                "steps_completed": r["steps_completed"],
                "metrics": r["metrics"],
                "report_time": r["report_time"],
            }

        trials.append(
            {
                "id": t,
                "experiment_id": EXPERIMENT_ID,
                "request_id": t,
                "state": "COMPLETED",
                "hparams": {
                    "lr": round(10 ** -(1 + (t * 7) % 40 / 10), 8),
                    "layers": 1 + t % 8,
                    "dropout": round((t % 10) / 20, 3),
                    "optimizer": ("adam", "sgd")[t % 2],
                },
                "seed": t,
                "restarts": 0,
                "run_id": 1,
                "steps_completed": n_points,
                "progress": 1.0,
                "runner_state": "",
                "start_time": TIME,
                "end_time": "2026-11-22T03:04:05.678Z",
                "exit_code": 0,
                "exit_summary": None,
                "run_state": None,
                "notebook_error": None,
                "allocation_id": None,
                "slot_ids": [],
                "latest_checkpoint": None,
                "latest_training": summary(series["training"][-1]),
                "latest_validation": summary(series["validation"][-1]),
                "best_validation": summary(best),
                "searcher_metric": best["metrics"]["validation_loss"],
            }
        )
    experiment["best_validation"] = min(t["searcher_metric"] for t in trials)
    return {"experiment": experiment, "trials": trials, "reports": reports}


def log_lines(trial: int, count: int = 8) -> list[dict]:
    return [
        {
            "id": trial * 100 + i,
            "trial_id": trial,
            "rank": 0,
            "stream": "stdout",
            "time": TIME,
            "line": f"epoch {i}: loss {training_loss(trial, i * 100):.4f}\n",
        }
        for i in range(count)
    ]


def output_bundle(data: dict) -> dict:
    """What `ExperimentWidget._repr_mimebundle_` writes, with the snapshot `load()` takes."""
    trials = data["trials"]
    per_trial = curve_points_per_trial(len(trials))
    metrics = []
    for group in ("validation", "training"):
        for t in sorted(data["reports"]):
            series = data["reports"][t][group]
            metrics.extend(series[i] for i in evenly_spaced_positions(len(series), per_trial))
    logs = [line for t in sorted(data["reports"])[-3:] for line in log_lines(t)]
    snapshot = {
        "experiment": data["experiment"],
        "trials": trials,
        "metrics": metrics,
        "logs": logs,
        "taken_at": "2026-11-22T03:04:06+00:00",
    }
    return {
        MIME_TYPE: {"experiment_id": EXPERIMENT_ID, "snapshot": snapshot},
        "text/html": snapshot_html(snapshot),
        "text/plain": snapshot_text(snapshot),
    }


class SyntheticApi:
    """Answers the widget's requests for the experiment from `data`, as master-lite would."""

    def __init__(self, data: dict) -> None:
        self.data = data
        self.experiment_body = json.dumps(
            {"experiment": data["experiment"], "trials": data["trials"]}
        )
        self.trials_body = json.dumps({"trials": data["trials"], "total": len(data["trials"])})
        # Each report serialized once: an answer is a join of the kept ones.
        self.encoded = {
            t: {g: [json.dumps(r) for r in s] for g, s in series.items()}
            for t, series in data["reports"].items()
        }
        self.metrics_bytes: list[int] = []

    def metrics_body(self, query: dict[str, list[str]]) -> str:
        group = (query.get("group") or [""])[0]
        after_id = int((query.get("after_id") or ["0"])[0] or 0)
        limit = int((query.get("max_datapoints") or ["0"])[0] or 0)
        ids = (query.get("trial_ids") or [""])[0]
        trial_ids = [int(x) for x in ids.split(",") if x] if ids else sorted(self.encoded)
        parts = []
        for t in trial_ids:
            for g in ("training", "validation"):
                if group and g != group:
                    continue
                series = self.data["reports"].get(t, {}).get(g, [])
                kept = [i for i, r in enumerate(series) if r["id"] > after_id]
                if limit:
                    kept = [kept[i] for i in evenly_spaced_positions(len(kept), limit)]
                parts.extend(self.encoded[t][g][i] for i in kept)
        body = '{"metrics":[' + ",".join(parts) + "]}"
        self.metrics_bytes.append(len(body))
        return body

    def handle(self, route) -> None:
        url = urlsplit(route.request.url)
        path = url.path.split("/determined/api/v1/", 1)[1]
        query = parse_qs(url.query)
        if path == f"experiments/{EXPERIMENT_ID}":
            body = self.experiment_body
        elif path == f"experiments/{EXPERIMENT_ID}/trials":
            body = self.trials_body
        elif path == f"experiments/{EXPERIMENT_ID}/metrics":
            body = self.metrics_body(query)
        elif path == f"experiments/{EXPERIMENT_ID}/checkpoints":
            body = json.dumps({"checkpoints": []})
        elif m := re.fullmatch(r"trials/(\d+)/logs", path):
            body = json.dumps({"logs": log_lines(int(m.group(1)))})
        else:
            route.fulfill(
                status=404,
                content_type="application/json",
                body=json.dumps({"error": f"not in the benchmark: {path}"}),
            )
            return
        json_answer(body)(route)


API_ROUTE = re.compile(
    rf".*/determined/api/v1/(experiments/{EXPERIMENT_ID}(/[a-z]+)?|"
    r"trials/\d+/logs)(\?.*)?$"
)


# -- in-page measurements ---------------------------------------------------------------------
# The measuring scripts return at once and leave their result in `window.__detBench` (the
# synchronous Playwright API serves intercepted requests only while Python waits inside a
# Playwright call, so Python waits with wait_for_function rather than inside evaluate).
# `__detWhen(root, check, done)` calls `done(value)` as soon as `check()` is truthy: checked
# after every DOM change under `root` (a MutationObserver: no frame of polling lag) and every
# frame. "Painted" = the next animation frame after the DOM was complete and laid out.
HELPERS = """() => {
    window.__detWhen = (root, check, done) => {
        let finished = false;
        const observer = new MutationObserver(() => attempt());
        const attempt = () => {
            if (finished) return;
            const value = check();
            if (value) { finished = true; observer.disconnect(); done(value); }
        };
        observer.observe(root, {subtree: true, childList: true, attributes: true,
                                attributeFilter: ['data-points']});
        const frame = () => { if (!finished) { attempt(); requestAnimationFrame(frame); } };
        frame();
    };
    window.__detWidgetReady = (n) => {
        const w = document.querySelector('.jp-Det-notebookWidget');
        if (!w || !w.querySelector('.jp-Det-expHeader .jp-Det-expName')) return null;
        return w.querySelectorAll('.jp-Det-trialsTable tbody tr[data-trial-id]').length === n ? w : null;
    };
    window.__detCurvesReady = (points) => {
        const charts = document.querySelectorAll('.jp-Det-notebookWidget .jp-Det-section-curves .jp-Det-chart');
        const drawn = [...charts].filter(
            c => Number(c.getAttribute('data-points')) === points && c.querySelector('canvas'));
        return charts.length >= 2 && drawn.length === charts.length ? charts : null;
    };
    window.__detApiEnd = (pattern) => {
        const entry = performance.getEntriesByType('resource').filter(e => new RegExp(pattern).test(e.name))[0];
        return entry ? entry.responseEnd : null;
    };
    window.__detNotebook = (path) =>
        [...window.jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === path);
}"""

START_OUTPUT = """(args) => {
    window.__detBench = undefined;
    const panel = window.__detNotebook(args.path);
    const cell = panel.content.model.cells.get(0);
    let attached = null;
    const start = performance.now();
    window.__detWhen(panel.content.node, () => {
        if (attached === null && panel.content.node.querySelector('.jp-Det-notebookWidget')) {
            attached = performance.now() - start;  // the renderer's node is in the output area
        }
        return window.__detWidgetReady(args.trials);
    }, (widget) => {
        widget.offsetHeight;  // layout
        const laidOut = performance.now();
        requestAnimationFrame(() => {
            const experimentEnd = window.__detApiEnd('experiments/1(\\\\?|$)');
            window.__detBench = {paint: performance.now() - start, laidOut: laidOut - start, attached,
                                 beforeApi: experimentEnd === null || experimentEnd > laidOut};
        });
    });
    cell.outputs.add({output_type: 'display_data', data: window.__detBundle, metadata: {}});
}"""

START_CURVES = """(points) => {
    window.__detBench = undefined;
    const widget = document.querySelector('.jp-Det-notebookWidget');
    const start = performance.now();
    widget.querySelector('.jp-Det-tab[data-section="curves"]').click();
    window.__detWhen(widget, () => window.__detCurvesReady(points), () => {
        requestAnimationFrame(() => { window.__detBench = {paint: performance.now() - start}; });
    });
}"""

START_END_TO_END = """(args) => {
    window.__detBench = undefined;
    const longTasks = [];
    const longObserver = new PerformanceObserver(list => longTasks.push(...list.getEntries()));
    longObserver.observe({type: 'longtask'});
    const panel = window.__detNotebook(args.path);
    const cell = panel.content.model.cells.get(0);
    const start = performance.now();
    let firstCurves = null;
    window.__detWhen(panel.content.node, () => window.__detWidgetReady(args.trials), (widget) => {
        widget.querySelector('.jp-Det-tab[data-section="curves"]').click();
        window.__detWhen(widget, () => {
            if (firstCurves === null && widget.querySelector('.jp-Det-chart canvas')) {
                firstCurves = performance.now() - start;  // from the snapshot's curves
            }
            return window.__detCurvesReady(args.points);
        }, () => {
            requestAnimationFrame(() => {
                const end = performance.now();
                const metricsEnd = window.__detApiEnd('experiments/1/metrics');
                longObserver.takeRecords().forEach(e => longTasks.push(e));
                longObserver.disconnect();
                const blocked = longTasks.filter(e => e.startTime >= start && e.startTime < end)
                    .reduce((sum, e) => sum + e.duration, 0);
                window.__detBench = {paint: end - start, firstCurves, blocked,
                                     metricsArrived: metricsEnd === null ? null : metricsEnd - start};
            });
        });
    });
    cell.outputs.add({output_type: 'display_data', data: window.__detBundle, metadata: {}});
}"""

START_OPEN = """(args) => {
    window.__detBench = undefined;
    const start = performance.now();
    const ready = args.widget
        ? () => window.__detWidgetReady(args.trials)
        : () => {
            const rows = document.querySelectorAll('.jp-Notebook .jp-OutputArea-output table tbody tr');
            return rows.length === args.rows ? rows[0].closest('table') : null;
        };
    window.__detWhen(document.body, ready, (node) => {
        node.offsetHeight;
        requestAnimationFrame(() => { window.__detBench = {paint: performance.now() - start}; });
    });
    window.jupyterapp.commands.execute('docmanager:open', {path: args.path});
}"""

IDEAL_TABLE = """(args) => {
    window.__detBench = undefined;
    const start = performance.now();
    const root = document.createElement('div');
    const header = document.createElement('div');
    for (const text of ['#1', 'widget bench', 'COMPLETED', 'Pause', 'Activate', 'Kill', 'Archive']) {
        const span = document.createElement(text.length > 8 ? 'span' : 'button');
        span.textContent = text;
        header.appendChild(span);
    }
    root.appendChild(header);
    const table = document.createElement('table');
    const head = document.createElement('tr');
    for (let c = 0; c < args.columns; c++) {
        const th = document.createElement('th');
        th.textContent = 'column ' + c;
        head.appendChild(th);
    }
    table.appendChild(head);
    for (let i = 1; i <= args.trials; i++) {
        const tr = document.createElement('tr');
        const box = document.createElement('td');
        const input = document.createElement('input');
        input.type = 'checkbox';
        box.appendChild(input);
        tr.appendChild(box);
        for (let c = 1; c < args.columns; c++) {
            const td = document.createElement('td');
            td.textContent = c === 1 ? String(i) : (1 / (i + c)).toPrecision(4);
            tr.appendChild(td);
        }
        table.appendChild(tr);
    }
    root.appendChild(table);
    document.body.appendChild(root);
    root.offsetHeight;
    requestAnimationFrame(() => {
        window.__detBench = {paint: performance.now() - start};
        root.remove();
    });
}"""

IDEAL_CURVES = """(args) => {
    window.__detBench = undefined;
    const start = performance.now();
    const canvases = [];
    for (let chart = 0; chart < 2; chart++) {
        const canvas = document.createElement('canvas');
        canvas.width = 1200; canvas.height = 240;
        document.body.appendChild(canvas);
        const ctx = canvas.getContext('2d');
        for (let s = 0; s < args.series; s++) {
            ctx.beginPath();
            for (let i = 1; i <= args.points; i++) {
                const y = 0.05 + (1 + s) / (1 + i / 40);
                const px = (i / args.points) * 1200, py = 240 - y * 40;
                if (i === 1) ctx.moveTo(px, py); else ctx.lineTo(px, py);
            }
            ctx.stroke();
        }
        ctx.getImageData(0, 0, 1, 1);  // wait for the draw to finish
        canvases.push(canvas);
    }
    requestAnimationFrame(() => {
        window.__detBench = {paint: performance.now() - start};
        canvases.forEach(c => c.remove());
    });
}"""

WAIT_RESULT = "() => window.__detBench !== undefined"


def write_notebook(directory: Path, name: str, outputs: list[dict]) -> Path:
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 1 if outputs else None,
                "id": "cell-0",
                "metadata": {},
                "outputs": outputs,
                "source": "show_experiment(1)" if outputs else "",
            }
        ],
        "metadata": {
            "kernelspec": {
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = directory / name
    path.write_text(json.dumps(notebook))
    return path


def main() -> int:
    support = _browser_test_support()
    missing = support.missing_browser_requirement()
    if missing:
        print(f"bench_widget_render: cannot run: {missing}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    load_at_start = os.getloadavg()[0]
    data = synthetic_experiment(N_TRIALS, N_POINTS)
    api = SyntheticApi(data)
    bundle = output_bundle(data)
    static_bundle = {k: v for k, v in bundle.items() if k != MIME_TYPE}
    no_html_bundle = {k: v for k, v in bundle.items() if k != "text/html"}
    plotted = min(PLOTTED_TRIALS, N_TRIALS)
    curve_points = plotted * min(N_POINTS, CURVE_POINTS)  # per chart
    # Plot, Trial, State, Progress, Steps, Restarts, the hparams, latest, best.
    columns = 6 + len(HPARAMS) + 2
    times: dict[str, list[float]] = {
        k: []
        for k in (
            "first",
            "first_laid_out",
            "first_attached",
            "e2e_blocked",
            "e2e_no_html",
            "e2e_no_html_blocked",
            "curves",
            "e2e",
            "e2e_first_curves",
            "e2e_metrics",
            "open_widget",
            "open_static",
            "ideal_table",
            "ideal_curves",
        )
    }
    before_api: list[bool] = []

    with tempfile.TemporaryDirectory(prefix="bench-widget-") as tmp:
        lab = support.Lab.start(Path(tmp))
        write_notebook(lab.notebook_dir, "bench.ipynb", [])
        display = {"output_type": "display_data", "data": bundle, "metadata": {}}
        nb_widget = write_notebook(lab.notebook_dir, "saved-widget.ipynb", [display])
        nb_static = write_notebook(
            lab.notebook_dir, "saved-static.ipynb", [dict(display, data=static_bundle)]
        )
        sizes = {
            "output": len(json.dumps(bundle)),
            "snapshot": len(json.dumps(bundle[MIME_TYPE])),
            "html": len(bundle["text/html"]),
            "nb_widget": nb_widget.stat().st_size,
            "nb_static": nb_static.stat().st_size,
        }
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=support.CHROMIUM, args=support.CHROMIUM_ARGS
                )

                def new_page():
                    page = browser.new_page(viewport={"width": 1500, "height": 950})
                    page.route(API_ROUTE, api.handle)
                    return page

                def measure(page, script: str, arg) -> dict:
                    page.evaluate(script, arg)
                    page.wait_for_function(WAIT_RESULT, timeout=60_000)
                    return page.evaluate("() => window.__detBench")

                def wait_for_curves_data(page) -> None:
                    """Until the answer of the plotted trials' curves is in the view's model."""
                    page.wait_for_function(
                        "() => performance.getEntriesByType('resource').some("
                        "e => /experiments\\/1\\/metrics/.test(e.name) && e.responseEnd > 0)",
                        timeout=60_000,
                    )
                    page.wait_for_timeout(500)  # the answer parsed into the model

                def output_page(path: str, data: dict):
                    page = new_page()
                    lab.open_notebook(page, path)
                    page.evaluate(HELPERS)
                    # An autosave must not have kept an earlier run's output.
                    page.evaluate(
                        "(p) => window.__detNotebook(p).content.model.cells.get(0).outputs.clear()",
                        path,
                    )
                    page.evaluate("(b) => { window.__detBundle = b; }", data)
                    page.wait_for_timeout(1000)  # Lab's own start-up work settles
                    return page

                def open_saved(widget: bool) -> float:
                    page = new_page()
                    lab.open_in(page)
                    page.evaluate(HELPERS)
                    page.wait_for_timeout(1000)  # Lab's own start-up work settles
                    result = measure(
                        page,
                        START_OPEN,
                        {
                            "path": "saved-widget.ipynb" if widget else "saved-static.ipynb",
                            "widget": widget,
                            "trials": N_TRIALS,
                            # The static HTML lists the best HTML_MAX_TRIALS trials only.
                            "rows": min(N_TRIALS, HTML_MAX_TRIALS),
                        },
                    )
                    page.close()
                    return result["paint"] / 1000

                # One unmeasured round: each notebook's kernel starts once (later pages join
                # the running session), and the server's caches warm up.
                for path in ("bench.ipynb", "saved-widget.ipynb", "saved-static.ipynb"):
                    page = new_page()
                    lab.open_notebook(page, path)
                    page.close()

                for repeat in range(REPEATS):
                    # 1 + 2: first paint, then the curves after the data arrived.
                    page = output_page("bench.ipynb", bundle)
                    result = measure(
                        page, START_OUTPUT, {"path": "bench.ipynb", "trials": N_TRIALS}
                    )
                    times["first"].append(result["paint"] / 1000)
                    times["first_laid_out"].append(result["laidOut"] / 1000)
                    times["first_attached"].append((result["attached"] or 0) / 1000)
                    before_api.append(result["beforeApi"])
                    wait_for_curves_data(page)
                    # The ideal once the widget is idle: its loading must not slow the ideal.
                    times["ideal_table"].append(
                        measure(page, IDEAL_TABLE, {"trials": N_TRIALS, "columns": columns})[
                            "paint"
                        ]
                        / 1000
                    )
                    times["curves"].append(
                        measure(page, START_CURVES, curve_points)["paint"] / 1000
                    )
                    times["ideal_curves"].append(
                        measure(
                            page,
                            IDEAL_CURVES,
                            {"series": plotted, "points": min(N_POINTS, CURVE_POINTS)},
                        )["paint"]
                        / 1000
                    )
                    page.close()

                    # 3: end to end; and, to show what the text/html fallback costs, the same
                    # output without it (alternating which goes first).
                    for html in (True, False) if repeat % 2 == 0 else (False, True):
                        page = output_page("bench.ipynb", bundle if html else no_html_bundle)
                        result = measure(
                            page,
                            START_END_TO_END,
                            {"path": "bench.ipynb", "trials": N_TRIALS, "points": curve_points},
                        )
                        key = "e2e" if html else "e2e_no_html"
                        times[key].append(result["paint"] / 1000)
                        times[key + "_blocked"].append(result["blocked"] / 1000)
                        if html:
                            times["e2e_first_curves"].append((result["firstCurves"] or 0) / 1000)
                            times["e2e_metrics"].append((result["metricsArrived"] or 0) / 1000)
                        page.close()

                    # 4: opening the saved notebook, alternating which goes first.
                    order = (True, False) if repeat % 2 == 0 else (False, True)
                    for widget in order:
                        times["open_widget" if widget else "open_static"].append(open_saved(widget))
                browser.close()
        finally:
            lab.stop()

    def ms(x: float) -> str:
        return f"{x * 1000:.0f}"

    def spread(values: list[float]) -> str:
        return f"{ms(min(values))}–{ms(max(values))} ms"

    med = {k: statistics.median(v) for k, v in times.items() if v}
    ideal_e2e = med["ideal_table"] + med["ideal_curves"]
    rows = [
        (
            "first paint: output added -> header + 100-row Trials table painted",
            "first",
            med["ideal_table"],
            True,
        ),
        (
            f'curves: "Learning curves" click -> 2 charts x {curve_points:,} points painted',
            "curves",
            med["ideal_curves"],
            True,
        ),
        ("end to end: output added -> header, then full curves painted", "e2e", ideal_e2e, True),
        (
            "diagnostic: end to end, the same output without its text/html fallback "
            "(baseline: end to end with it)",
            "e2e_no_html",
            med["e2e"],
            False,
        ),
        (
            "saved notebook opened -> widget header + table painted (baseline: the text/html "
            "snapshot's table)",
            "open_widget",
            med["open_static"],
            False,
        ),
    ]
    ok = True
    table = [
        "| scenario | measured (median) | runs | ideal / baseline (median) | ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for label, key, ideal, targeted in rows:
        m = med[key]
        met = m < TARGET_SECONDS
        if targeted:
            ok &= met
        verdict = (
            f"< {TARGET_SECONDS * 1000:.0f} ms: {'meets target' if met else 'MISSES target'}"
            if targeted
            else "reference"
        )
        print(
            f"{label}: measured {m * 1000:.1f} ms  ideal {ideal * 1000:.1f} ms  "
            f"ratio {m / ideal:.1f}x  ({verdict}; runs {', '.join(ms(x) for x in times[key])} ms)"
        )
        table.append(
            f"| {label} | {m * 1000:.0f} ms | {', '.join(ms(x) for x in times[key])} "
            f"({spread(times[key])}) | {ideal * 1000:.0f} ms | {m / ideal:.1f}x | {verdict} |"
        )
    notes = [
        f"first paint: the widget's node was in the output area at median "
        f"{ms(med['first_attached'])} ms (JupyterLab's output handling + the renderer's "
        f"synchronous part), complete and laid out (before the frame) at median "
        f"{ms(med['first_laid_out'])} ms; "
        f"painted from the output's snapshot before the experiment's API answer arrived in "
        f"{sum(before_api)}/{len(before_api)} runs",
        f"end to end: the snapshot's curves ({plotted} x {curve_points_per_trial(N_TRIALS)} points "
        f"per chart) first drawn at median {ms(med['e2e_first_curves'])} ms; the API's curves "
        f"answer (through Playwright's interception) ended at median {ms(med['e2e_metrics'])} ms "
        f"after the output was added; main-thread long tasks (> 50 ms) took median "
        f"{ms(med['e2e_blocked'])} ms of the end-to-end time (median {ms(med['e2e_no_html_blocked'])} "
        f"ms without the text/html fallback: JupyterLab's table of contents sanitizes an output's "
        f"text/html 200 ms after each change of the notebook, whether or not its panel is open)",
        f"saved notebook without the widget (text/html snapshot): median {ms(med['open_static'])} ms, "
        f"runs {', '.join(ms(x) for x in times['open_static'])} ms",
        f"ideals: table {ms(med['ideal_table'])} ms (runs {', '.join(ms(x) for x in times['ideal_table'])}), "
        f"curves {ms(med['ideal_curves'])} ms (runs {', '.join(ms(x) for x in times['ideal_curves'])})",
        f"sizes: output bundle {sizes['output'] / 1e6:.2f} MB (snapshot {sizes['snapshot'] / 1e6:.2f} MB, "
        f"text/html {sizes['html'] / 1e6:.2f} MB); saved notebooks {sizes['nb_widget'] / 1e6:.2f} MB "
        f"with the widget, {sizes['nb_static'] / 1e6:.2f} MB without; curves answer "
        f"{max(api.metrics_bytes or [0]) / 1e6:.2f} MB",
    ]
    for note in notes:
        print("    " + note)

    record(
        "Notebook widget render (bench_widget_render.py)",
        "\n".join(
            [
                f"Workload: the experiment widget (`{MIME_TYPE}` output, as `show_experiment` writes it) "
                f"for a COMPLETED experiment of {N_TRIALS} trials x {N_POINTS:,} training and "
                f"{N_POINTS:,} validation reports each, in a real JupyterLab with Debian's Chromium "
                f"(headless, via Playwright); API answers synthetic (request interception, downsampled "
                f"like master-lite: the view asks for the {plotted} best trials' curves, at most "
                f"{CURVE_POINTS:,} reports per trial and group). Ideals: the same header and "
                f"{N_TRIALS}-row table built with bare `createElement`, and {plotted} x "
                f"{min(N_POINTS, CURVE_POINTS):,}-point paths stroked on 2 canvases with the 2D API, "
                f"in the same page; each measured until the next animation frame. Median of {REPEATS} "
                f"repeats, a fresh page each (see the script's docstring).",
                "",
                *table,
                "",
                *[f"* {note}" for note in notes],
                f"* load: 1-minute load average {load_at_start:.1f} at the start, "
                f"{os.getloadavg()[0]:.1f} at the end (the cores are shared with other work; "
                f"the ideals run in the same pages between the measurements, so load hits both)",
                "",
                f"Result: {'PASS' if ok else 'FAIL'} (target < {TARGET_SECONDS * 1000:.0f} ms for the "
                f"first three)",
            ]
        ),
    )
    return 0 if ok else 1


if __name__ == "__main__":
    # A SIGTERM (e.g. from `timeout`) must still stop the Lab server in main's `finally`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
