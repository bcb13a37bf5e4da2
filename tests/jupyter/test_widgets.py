"""The experiment widget without a browser: a recording comm, assertions on widget state."""
from __future__ import annotations

import base64
import io
import tarfile
import time

import comm
import ipywidgets
import pytest

from jupyter_determined._widgets import (ExperimentWidget, render_curve_svg,
                                         render_trials_table)


class RecordingComm(comm.DummyComm):
    """Stands in for the kernel's comm: keeps every message the widget would send."""

    def __init__(self, *args, **kwargs) -> None:
        self.messages: list[tuple[str, dict]] = []
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys) -> None:
        self.messages.append((msg_type, data or {}))


@pytest.fixture
def comms(monkeypatch) -> list[RecordingComm]:
    created: list[RecordingComm] = []

    def create_comm(*args, **kwargs):
        created.append(RecordingComm(*args, **kwargs))
        return created[-1]

    monkeypatch.setattr(ipywidgets.comm, "create_comm", create_comm)
    return created


EXPERIMENT = {"id": 7, "name": "digits", "state": "ACTIVE", "progress": 0.25,
              "searcher": {"name": "adaptive_asha", "metric": "val_error",
                           "smaller_is_better": True}}


def _sent_updates(comms: list[RecordingComm], model_id: str) -> list[dict]:
    return [data["state"] for c in comms if c.comm_id == model_id
            for kind, data in c.messages if data.get("method") == "update"]


def test_events_update_traitlets_and_reach_the_frontend(comms) -> None:
    widget = ExperimentWidget(7)
    widget.apply_event("experiment", EXPERIMENT)
    widget.apply_event("trial", {"id": 1, "state": "ACTIVE", "hparams": {"alpha": 0.01},
                                 "steps_completed": 2})
    widget.apply_event("metric", {"trial_id": 1, "group": "validation", "steps_completed": 2,
                                  "metrics": {"val_error": 0.4}})
    widget.apply_event("metric", {"trial_id": 1, "group": "validation", "steps_completed": 4,
                                  "metrics": {"val_error": 0.3}})
    widget.apply_event("metric", {"trial_id": 1, "group": "training", "steps_completed": 4,
                                  "metrics": {"val_error": 99.0}})  # not a validation: ignored
    widget.apply_event("log", {"trial_id": 1, "line": "epoch 1 <done>\n"})

    assert (widget.experiment_name, widget.state, widget.metric) == ("digits", "ACTIVE",
                                                                     "val_error")
    assert widget.progress == 0.25
    assert widget.curves == {"1": [[2.0, 0.4], [4.0, 0.3]]}
    assert widget.trials["1"]["best_metric"] == 0.3
    assert widget.trials["1"]["latest_metric"] == 0.3
    assert widget.log_lines == ["[trial 1] epoch 1 <done>"]
    # The frontend was told: state as synced traitlets, views re-rendered from them.
    updates = _sent_updates(comms, widget.model_id)
    assert {"state": "ACTIVE"} in updates
    assert any(u.get("curves") == {"1": [[2.0, 0.4], [4.0, 0.3]]} for u in updates)
    assert "epoch 1 &lt;done&gt;" in widget._logs.value  # escaped, never raw HTML
    assert "det-curve" in widget._chart.value
    assert not widget.pause_button.disabled and widget.activate_button.disabled


def test_larger_is_better_keeps_the_maximum_and_finished_disables_buttons(comms) -> None:
    widget = ExperimentWidget(7)
    widget.apply_experiment({**EXPERIMENT, "searcher": {"metric": "acc",
                                                        "smaller_is_better": False}})
    for steps, value in ((1, 0.5), (2, 0.9), (3, 0.7)):
        widget.apply_metric({"trial_id": 3, "group": "validation", "steps_completed": steps,
                             "metrics": {"acc": value}})
    assert widget.trials["3"]["best_metric"] == 0.9
    assert widget.trials["3"]["latest_metric"] == 0.7
    widget.apply_experiment({**EXPERIMENT, "state": "PAUSED"})
    assert widget.pause_button.disabled and not widget.activate_button.disabled
    widget.apply_experiment({**EXPERIMENT, "state": "COMPLETED", "progress": 1.0})
    assert widget.finished
    assert widget.pause_button.disabled and widget.activate_button.disabled
    assert widget.kill_button.disabled


def test_static_snapshot_is_readable_without_widgets(comms) -> None:
    widget = ExperimentWidget(7)
    widget.apply_experiment({**EXPERIMENT, "state": "COMPLETED", "progress": 1.0})
    widget.apply_trial({"id": 1, "state": "COMPLETED", "hparams": {"alpha": 0.01},
                        "steps_completed": 4,
                        "best_validation": {"metrics": {"val_error": 0.25}}})
    bundle = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "COMPLETED" in bundle["text/html"] and "alpha=0.01" in bundle["text/html"]
    assert bundle["text/plain"].splitlines() == [
        "Experiment 7 digits: COMPLETED (100%)",
        "  trial 1 COMPLETED steps=4 best val_error=0.25"]


def test_renderers() -> None:
    assert "no trials yet" in render_trials_table([], "loss")
    svg = render_curve_svg({"2": [[1.0, 0.5], [2.0, 0.5]], "10": [[1.0, 0.1]]}, "loss")
    assert svg.count("<polyline") == 2  # one line per trial, even with flat values
    assert svg.index("data-trial='2'") < svg.index("data-trial='10'")  # numeric order
    assert "no validation loss yet" in render_curve_svg({}, "loss")


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


def _context(script: str) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = script.encode()
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


def _create(server, length: int) -> int:
    from determined.common.api import Session

    session = Session(server.det_master, server.token)
    config = {"name": f"widget-{length}", "entrypoint": "python3 train.py", "max_restarts": 0,
              "searcher": {"name": "single", "metric": "loss", "max_length": length}}
    return session.post("/experiments", {"config": config,
                                         "context": _context(SLOW_TRIAL)})["experiment"]["id"]


@pytest.mark.slow
def test_widget_follows_the_event_stream_and_its_buttons_act(start_jupyter, comms) -> None:
    from determined.common.api import Session

    server = start_jupyter(app="jupyter_server")
    session = Session(server.det_master, server.token)

    finished = ExperimentWidget(_create(server, 4), session=session).follow()
    assert finished.wait(timeout=120), finished.state
    assert finished.state == "COMPLETED"
    assert finished.curves == {"1": [[2.0, 0.5], [4.0, 0.25]]}
    assert finished.trials["1"]["state"] == "COMPLETED"
    assert any("step 4" in line for line in finished.log_lines)

    long_running = ExperimentWidget(_create(server, 400), session=session).follow()
    deadline = time.monotonic() + 60
    while not long_running.curves and time.monotonic() < deadline:
        time.sleep(0.2)
    assert long_running.curves, "no validation arrived through the event stream"
    long_running.pause_button.click()
    deadline = time.monotonic() + 60
    while long_running.state != "PAUSED" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert long_running.state == "PAUSED"
    long_running.kill_button.click()
    assert long_running.wait(timeout=60)
    assert long_running.state == "CANCELED"
    assert long_running.error == ""
