"""The experiment widget under a notebook cell: the output a submission displays.

The output is one display with three representations, written by the kernel:

* `application/vnd.determined.experiment+json` (`MIME_TYPE`): the experiment id and a snapshot
  (experiment, trials, downsampled curves, the latest log lines) as the master's API answers
  them. The labextension renders it as the live experiment view (labextension/src/notebook/
  notebookWidget.ts): the snapshot is its first paint and what it shows with no master; from
  then on it reads the master's API itself, so its buttons work while the kernel is busy or
  gone. What the view shows changes only that way: the kernel never pushes updates to it.
* `text/html`, `text/plain`: the same snapshot as a static page (`_snapshot.py`), for nbconvert,
  GitHub and frontends without the labextension.

The kernel writes the output twice: when it is displayed, and once more when the experiment has
ended (`follow()`: a thread that polls the experiment), so a saved notebook records
how it ended in every representation. Where the kernel is gone first, the labextension writes the
final snapshot into the output instead.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
import uuid
from typing import Any

from determined.common.api import encode_non_finite
from determined.common.states import TERMINAL_EXPERIMENT_STATES
from jupyter_determined._contract import (
    EXPERIMENT_MIME_TYPE,
    LOG_TAIL_LINES,
    LOG_TAIL_TRIALS,
)
from jupyter_determined.kernel._snapshot import (
    curves_of,
    cut_line,
    format_number,
    render_curve_svg,
    render_trials_table,
    snapshot_html,
    snapshot_text,
    top_trials,
)

log = logging.getLogger("jupyter_determined.widgets")

MIME_TYPE = EXPERIMENT_MIME_TYPE
TERMINAL = {str(state) for state in TERMINAL_EXPERIMENT_STATES}

# The snapshot travels in the notebook file and JupyterLab copies an output's data whenever it
# reads it: its curves are downsampled by the master (first, last and evenly spaced reports of
# each trial), about 2,000 points per group in all; the live view fetches the rest.
CURVE_POINTS_TOTAL = 2000
CURVE_POINTS_PER_TRIAL = (5, 200)  # bounds per trial

POLL_SECONDS = 1.0  # how often the follower asks the master whether the experiment has ended
MAX_POLL_SECONDS = 10.0  # the longest wait between polls while the master cannot be reached
# How often, at most, a running experiment's output is rewritten with a fresh snapshot. Only
# frontends without the extension (VS Code, classic Notebook, nbconvert of a live notebook) show
# it; the extension's renderer ignores the kernel's rewrites and reads the master itself.
LIVE_SNAPSHOT_SECONDS = 10.0


def curve_points_per_trial(num_trials: int) -> int:
    """`max_datapoints` for the curves of `num_trials` trials in a snapshot."""
    low, high = CURVE_POINTS_PER_TRIAL
    return max(low, min(high, CURVE_POINTS_TOTAL // max(1, num_trials)))


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
        return curves_of(self.snapshot["metrics"], group, self.metric)

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
            # As the master answers it (a diverged metric as "NaN"): the SDK decoded it to a
            # float, which Jupyter's message encoder and JSON.parse would refuse.
            MIME_TYPE: {
                "experiment_id": self.experiment_id,
                "snapshot": encode_non_finite(snapshot),
            },
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
        """Rewrite the displayed output with the current snapshot (no-op when not displayed)."""
        if not self._displayed:
            return
        try:
            from IPython.display import update_display

            update_display(self._repr_mimebundle_(), raw=True, display_id=self._display_id)
        except Exception:  # a closed kernel channel must not kill the follower
            log.debug("could not refresh the experiment snapshot", exc_info=True)

    # --- following ------------------------------------------------------------------------------

    def follow(self) -> ExperimentWidget:
        """Start the background thread that keeps this object's experiment and trials current
        (`state`, `finished`) and writes the final snapshot into the output when the experiment
        ends (returns at once). While it runs, the output is rewritten at most every
        `LIVE_SNAPSHOT_SECONDS` and only when the experiment or its trials changed, for
        frontends without the extension; the extension's live view reads the master itself."""
        if self._follower is not None and self._follower.is_alive():
            return self
        self._stop.clear()
        self._follower = threading.Thread(
            target=self._follow, daemon=True, name=f"det-widget-{self.experiment_id}"
        )
        self._follower.start()
        return self

    def _follow(self) -> None:
        delay = POLL_SECONDS
        written: str | None = None  # the experiment and trials the output last showed
        written_at = time.monotonic()
        while not self._stop.is_set():
            try:
                answer = self._session().get(f"/experiments/{self.experiment_id}")
                self.error = ""
                delay = POLL_SECONDS
                with self._lock:  # this object's state and trials stay current in the kernel
                    self.snapshot = {
                        **self.snapshot,
                        "experiment": answer["experiment"],
                        "trials": list(answer.get("trials") or []),
                    }
                if str(answer["experiment"].get("state")) in TERMINAL:
                    self.load()  # the final snapshot: every representation records the end
                    self.refresh_display()
                    return
                seen = json.dumps([answer["experiment"], answer.get("trials")], default=str)
                due = time.monotonic() - written_at >= LIVE_SNAPSHOT_SECONDS
                if self._displayed and seen != written and due:
                    self.load()
                    self.refresh_display()
                    written, written_at = seen, time.monotonic()
            except Exception as exc:
                self.error = f"cannot reach the master: {exc}"
                log.debug("experiment %s: poll failed: %s", self.experiment_id, exc)
                delay = min(delay * 2, MAX_POLL_SECONDS)
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
        follow: write the final snapshot into the output when the experiment ends.
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
    "curve_points_per_trial",
    "cut_line",
    "format_number",
    "render_curve_svg",
    "render_trials_table",
    "show_experiment",
    "snapshot_html",
    "snapshot_text",
    "top_trials",
]
