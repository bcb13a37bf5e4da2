"""The experiment widget's kernel side: the snapshot it displays, its static renderers, and the
follower that writes the final snapshot.

The live view is the labextension's (tests/browser/test_notebook_widget_e2e.py); here the
output bundle, the static HTML/SVG snapshot and the follower are checked.
"""

from __future__ import annotations

import re

import pytest

from jupyter_determined import _contract
from jupyter_determined.kernel._widget import (
    MIME_TYPE,
    ExperimentWidget,
    cut_line,
    format_number,
    render_curve_svg,
    render_trials_table,
    snapshot_html,
    snapshot_text,
)
from tests._support import context_tarball, wait_until

EXPERIMENT = {
    "id": 7,
    "name": "digits",
    "state": "COMPLETED",
    "progress": 0.75,
    "best_validation": 0.25,
    "searcher": {"name": "adaptive_asha", "metric": "val_error", "smaller_is_better": True},
}
TRIALS = [
    {
        "id": 1,
        "experiment_id": 7,
        "state": "COMPLETED",
        "hparams": {"lr": 0.0001},
        "steps_completed": 4,
        "latest_validation": {"metrics": {"val_error": 0.3}},
        "best_validation": {"metrics": {"val_error": 0.25}},
    },
    {
        "id": 2,
        "experiment_id": 7,
        "state": "ERROR",
        "hparams": {"lr": 0.1},
        "steps_completed": 1,
        "exit_summary": "killed by SIGKILL (signal 9)",
        "best_validation": {"metrics": {"val_error": 0.9}},
    },
    {
        "id": 3,
        "experiment_id": 7,
        "state": "ACTIVE",
        "run_state": "QUEUED",
        "hparams": {"lr": 0.01},
        "steps_completed": 0,
    },
]
METRICS = [
    {
        "id": 1,
        "trial_id": 1,
        "group": "validation",
        "steps_completed": 2,
        "metrics": {"val_error": 0.4},
    },
    {
        "id": 2,
        "trial_id": 1,
        "group": "validation",
        "steps_completed": 4,
        "metrics": {"val_error": 0.25},
    },
    {
        "id": 3,
        "trial_id": 2,
        "group": "validation",
        "steps_completed": 1,
        "metrics": {"val_error": 0.9},
    },
    {
        "id": 4,
        "trial_id": 1,
        "group": "training",
        "steps_completed": 4,
        "metrics": {"val_error": 0.2},
    },
]
SNAPSHOT = {
    "experiment": EXPERIMENT,
    "trials": TRIALS,
    "metrics": METRICS,
    "logs": [{"id": 9, "trial_id": 1, "line": "<b>epoch 1</b>\n"}],
    "taken_at": "2026-11-23T10:00:00+00:00",
}


def test_the_output_carries_the_live_view_a_snapshot_and_text() -> None:
    widget = ExperimentWidget(7)
    widget.snapshot = SNAPSHOT
    bundle = widget._repr_mimebundle_()
    assert bundle[MIME_TYPE] == {"experiment_id": 7, "snapshot": SNAPSHOT}
    # No ipywidget model: a saved notebook never shows "model not found".
    assert "application/vnd.jupyter.widget-view+json" not in bundle
    assert bundle["text/plain"].splitlines() == [
        "Experiment 7 digits: COMPLETED (100%)",  # COMPLETED is 100 %, whatever progress said
        "  trial 1 COMPLETED steps=4 best val_error=0.25",
        "  trial 2 ERROR steps=1 best val_error=0.9 (killed by SIGKILL (signal 9))",
        "  trial 3 QUEUED steps=0 best val_error=",
    ]
    assert widget.curves() == {"1": [[2.0, 0.4], [4.0, 0.25]], "2": [[1.0, 0.9]]}
    assert widget.curves("training") == {"1": [[4.0, 0.2]]}


def test_the_html_snapshot_is_escaped_rounded_and_names_states() -> None:
    page = snapshot_html({**SNAPSHOT, "experiment": {**EXPERIMENT, "name": "<b>digits</b>"}})
    assert "&lt;b&gt;digits&lt;/b&gt;" in page and "<b>digits</b>" not in page
    assert "lr=1.000e-04" in page  # not "0.0001000000000000000020816681711721685"
    assert "QUEUED" in page and "killed by SIGKILL (signal 9)" in page
    assert "height:6px;width:100%" in page  # the progress of a COMPLETED experiment is full
    # A static record: the validation curves only (zoom, training curves and logs are the
    # live view's), and no script.
    assert page.count("class='det-chart'") == 1
    assert "epoch 1" not in page and "<script" not in page


def test_the_snapshot_says_why_a_trial_waits_or_was_preempted() -> None:
    """A reader of a saved notebook (or a frontend without the labextension) sees the
    scheduler's reason a trial waits and that a trial is being preempted, not only its state."""
    waiting = {
        **TRIALS[2],
        "wait_reason": "waiting: ann is at their 2-slot quota",
    }
    preempted = {
        "id": 4,
        "experiment_id": 7,
        "state": "ACTIVE",
        "run_state": "STOPPING",
        "stop_reason": "rebalance",
        "hparams": {"lr": 0.02},
        "steps_completed": 3,
    }
    paused = {**preempted, "id": 5, "state": "PAUSED", "stop_reason": "pause"}
    snapshot = {**SNAPSHOT, "trials": [waiting, preempted, paused]}
    assert snapshot_text(snapshot).splitlines()[1:] == [
        "  trial 3 QUEUED steps=0 best val_error= (waiting: ann is at their 2-slot quota)",
        "  trial 4 PAUSING steps=3 best val_error= (preempted: the scheduler gave its slots to "
        "another job; it resumes from its checkpoint)",
        "  trial 5 PAUSING steps=3 best val_error= (stopping: user pause)",
    ]
    page = snapshot_html(snapshot)
    assert "waiting: ann is at their 2-slot quota" in page
    assert "preempted: the scheduler gave its slots to another job" in page
    assert "stopping: user pause" in page


def test_the_widget_and_the_labextension_share_one_contract() -> None:
    assert MIME_TYPE == _contract.EXPERIMENT_MIME_TYPE
    widget = ExperimentWidget(7, session=FakeMaster(["COMPLETED"]))
    widget.load()
    # The log tail of the snapshot is as long as the live view's (LOG_TAIL_LINES, one place).
    assert widget.session.tails == [_contract.LOG_TAIL_LINES]


def test_numbers_read_as_a_person_reads_them() -> None:
    assert [format_number(v) for v in (0.0001, 0.12345678, 3, 1234567.0, None, "x")] == [
        "1.000e-04",
        "0.1235",
        "3",
        "1.235e+06",
        "",
        "x",
    ]
    assert cut_line("x" * 20_000, 400) == "x" * 400 + "… (19,600 more characters)"
    assert cut_line("short\n") == "short"


def test_curves_draw_single_points_and_mark_the_best_trial() -> None:
    svg = render_curve_svg(
        {"2": [[1.0, 0.5], [2.0, 0.5]], "10": [[3.0, 0.1]]}, "loss", best_trial="10"
    )
    assert svg.count("<polyline") == 2  # one line per trial, even with flat values
    assert svg.index("data-trial='2'") < svg.index("data-trial='10'")  # numeric order
    # The one-point series is a visible marker, and the best line is the thick one.
    assert re.search(r"<circle cx='[\d.]+' cy='[\d.]+' r='3.5'", svg)
    assert "stroke-width='3'" in svg and "trial 10 (best)" in svg
    # The y range is labelled at its ends: the data's lowest and highest values.
    labels = re.findall(r"text-anchor='end' font-size='10' fill='currentColor'>([-\d.e+]+)<", svg)
    assert labels[:2] == ["0.5", "0.1"]
    assert "no validation loss yet" in render_curve_svg({}, "loss")
    assert "no trials yet" in render_trials_table([], "loss")


def test_a_large_search_keeps_the_fallback_small_and_shows_the_best() -> None:
    # 100 trials x 200 points: JupyterLab sanitizes text/html outputs after every change of the
    # notebook, so the fallback shows the best trials and a thinned chart, not everything.
    trials = [
        {
            "id": i,
            "experiment_id": 7,
            "state": "COMPLETED",
            "hparams": {"lr": i / 1000},
            "steps_completed": 200,
            "best_validation": {"metrics": {"val_error": 1.0 - i / 100}},
        }
        for i in range(1, 101)
    ]
    metrics = [
        {
            "id": i * 1000 + step,
            "trial_id": i,
            "group": group,
            "steps_completed": step,
            "metrics": {"val_error": 1.0 / step},
        }
        for i in range(1, 101)
        for step in range(1, 201)
        for group in ("validation", "training")
    ]
    page = snapshot_html({**SNAPSHOT, "trials": trials, "metrics": metrics})
    assert len(page) < 60_000, len(page)
    assert "75 more trials (best 25 shown; curves of the best 10)" in page
    assert "data-trial='100'" in page and "data-trial='1'" not in page  # the best, not the first
    assert page.count("<polyline") == 10  # the validation curves of the 10 best


class FakeMaster:
    """Answers the widget's GETs from a script of experiment states (one per poll)."""

    def __init__(self, states: list[str]) -> None:
        self.states = states
        self.polls = 0
        self.tails: list[int] = []

    def get(self, path: str, params: dict | None = None) -> dict:
        if path.endswith("/metrics"):
            return {"metrics": [m for m in METRICS if m["group"] == params["group"]]}
        if path.endswith("/logs"):
            self.tails.append(params["tail"])
            return {"logs": [{"id": 1, "trial_id": 1, "line": "y" * 5000}]}
        state = self.states[min(self.polls, len(self.states) - 1)]
        self.polls += 1
        return {"experiment": {**EXPERIMENT, "state": state}, "trials": TRIALS[:1]}


def test_the_follower_writes_the_final_state_and_stops(monkeypatch) -> None:
    master = FakeMaster(["ACTIVE", "ACTIVE", "COMPLETED"])
    widget = ExperimentWidget(7, session=master)
    shown: list[dict] = []
    widget._displayed = True
    monkeypatch.setattr(widget, "refresh_display", lambda: shown.append(widget.snapshot))
    monkeypatch.setattr("jupyter_determined.kernel._widget.POLL_SECONDS", 0.01)
    widget.follow()
    assert widget.wait(timeout=30)
    assert widget.state == "COMPLETED"
    # Within LIVE_SNAPSHOT_SECONDS of the start the output is written only once more, at the
    # end, with the final state (the extension's live view reads the master itself).
    assert len(shown) == 1 and shown[-1]["experiment"]["state"] == "COMPLETED"
    assert [line["line"] for line in shown[-1]["logs"]] == [cut_line("y" * 5000)]
    assert not widget._follower.is_alive()


def test_the_follower_rewrites_a_running_output_only_when_it_changed(monkeypatch) -> None:
    """Frontends without the extension see a running experiment through the kernel's
    rewrites: one per change (never for an unchanged poll), and the final one at the end."""
    master = FakeMaster(["ACTIVE", "ACTIVE", "ACTIVE", "PAUSED", "PAUSED", "COMPLETED"])
    widget = ExperimentWidget(7, session=master)
    shown: list[str] = []
    widget._displayed = True
    monkeypatch.setattr(
        widget, "refresh_display", lambda: shown.append(widget.snapshot["experiment"]["state"])
    )
    monkeypatch.setattr("jupyter_determined.kernel._widget.POLL_SECONDS", 0.01)
    monkeypatch.setattr("jupyter_determined.kernel._widget.LIVE_SNAPSHOT_SECONDS", 0.0)
    widget.follow()
    assert widget.wait(timeout=30)
    assert shown == ["ACTIVE", "PAUSED", "COMPLETED"]


# --- against a real hosted master ------------------------------------------------------------

SLOW_TRIAL = """\
import time
import determined as det

with det.core.init() as core_context:
    steps = 0
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            time.sleep(0.2)
            print(f"step {steps}", flush=True)
            if steps % 2 == 0:
                core_context.train.report_validation_metrics(steps_completed=steps,
                                                             metrics={"loss": 1.0 / steps})
                with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                    (path / "state").write_text(str(steps))
                if core_context.preempt.should_preempt():
                    raise SystemExit(0)
        op.report_completed(1.0 / steps)
"""


def _create(server, length: int) -> int:
    from determined.common.api import Session

    session = Session(server.det_master, server.token)
    config = {
        "name": f"widget-{length}",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": length},
    }
    return session.post(
        "/experiments", {"config": config, "context": context_tarball({"train.py": SLOW_TRIAL})}
    )["experiment"]["id"]


@pytest.mark.slow
def test_widget_follows_a_real_master_and_acts(start_jupyter) -> None:
    from determined.common.api import Session

    server = start_jupyter(app="jupyter_server")
    session = Session(server.det_master, server.token)

    finished = ExperimentWidget(_create(server, 4), session=session).follow()
    assert finished.wait(timeout=120), finished.state
    assert finished.state == "COMPLETED"
    assert finished.curves() == {"1": [[2.0, 0.5], [4.0, 0.25]]}
    assert finished.snapshot["trials"][0]["state"] == "COMPLETED"
    assert any("step 4" in line["line"] for line in finished.snapshot["logs"])

    long_running = ExperimentWidget(_create(server, 400), session=session).follow()
    wait_until(lambda: long_running.state == "ACTIVE", 60, "the experiment to be ACTIVE")
    assert long_running.action("pause")["state"] == "PAUSED"
    assert long_running.action("kill")["state"] in ("STOPPING_CANCELED", "CANCELED")
    assert long_running.wait(timeout=60)
    assert long_running.state == "CANCELED"
    assert long_running.error == ""
