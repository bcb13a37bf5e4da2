"""Following a trial's logs and an experiment's progress.

REST polling is the source of truth (so no event can be lost to a race between reading the
backlog and subscribing); the `/events` stream only wakes the poller early, which makes following
feel live. If the stream cannot be opened the poller simply keeps its interval.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from determined.cli import _render
from determined.common import api
from determined.common.states import TERMINAL_EXPERIMENT_STATES, TERMINAL_TRIAL_STATES

if TYPE_CHECKING:  # `det` imports requests only when it talks to a master
    import requests


class EventWaker:
    """Reads `/events` in a background thread and sets a flag on every event it sees."""

    # Above the server's 15 s keepalive, so a dead stream ends the thread (the session adds
    # its own connect timeout).
    read_timeout: float | None = 40.0

    def __init__(self, session: api.Session, params: dict) -> None:
        self._session = session
        self._params = params
        self._event = threading.Event()
        self._closed = threading.Event()
        self._response: requests.Response | None = None
        # Held while the response is closed, and while close() shuts its socket down: the
        # descriptor must not be closed (and its number reused by another file) in between.
        self._closing_lock = threading.Lock()
        self._response_closed = False
        self._thread = threading.Thread(target=self._run, name="det-cli-events", daemon=True)

    def start(self) -> EventWaker:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            response = self._session.request(
                "GET", "/events", params=self._params, stream=True, timeout=self.read_timeout
            )
            self._response = response
            try:
                if self._closed.is_set():
                    return
                for line in response.iter_lines(decode_unicode=True):
                    if self._closed.is_set():
                        break
                    if line and line.startswith("data:"):
                        self._event.set()
            finally:
                with self._closing_lock:
                    response.close()  # here, where no read of it can be under way
                    self._response_closed = True
        except Exception:  # noqa: BLE001 - any failure just means "poll at the normal interval"
            pass

    def wait(self, timeout: float) -> None:
        self._event.wait(timeout)
        self._event.clear()

    def close(self) -> None:
        """Stop reading; returns at once. The reader thread is usually blocked reading the
        stream until the server's next event or keepalive (15 s): closing the response here
        would wait for that read (it holds the stream's lock), which kept `det e create -f`
        and every other follow 15 s past the end. Shutting the socket down ends the read now;
        the reader thread then closes the response itself."""
        self._closed.set()
        response = self._response
        if response is None:
            return  # the reader sees _closed once its request returns
        with self._closing_lock:
            if self._response_closed:
                return
            try:
                # Through a duplicate of the stream's descriptor: shutdown() acts on the
                # connection itself, whichever descriptor names it (the connection object may
                # have let go of its socket already, e.g. for an HTTP/1.0 stream).
                with socket.socket(fileno=os.dup(response.raw.fileno())) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except (OSError, ValueError, AttributeError):  # the server closed it already
                pass

    def join(self) -> None:
        """Wait until the reader thread has ended (after `close`)."""
        self._thread.join()


def format_log(log: dict) -> str:
    """`[time] [rank=N] line`; the rank part is left out for lines without a rank."""
    rank = log.get("rank")
    prefix = f"[{log.get('time', '')}]"
    if rank is not None:
        prefix += f" [rank={rank}]"
    return f"{prefix} {log.get('line', '').rstrip(chr(10))}"


def print_logs(logs: list[dict], *, as_json: bool, write: Callable[[str], None]) -> None:
    for log in logs:
        write(json.dumps(log, sort_keys=True) if as_json else format_log(log))


def follow_trial(
    session: api.Session,
    trial_id: int,
    *,
    after_id: int = 0,
    as_json: bool = False,
    log_filters: dict | None = None,
    interval: float = 1.0,
    write: Callable[[str], None] | None = None,
    on_poll: Callable[[], None] | None = None,
) -> dict:
    """Print the trial's logs after `after_id` until it reaches a terminal state; return the trial."""
    write = write or print
    filters = {k: v for k, v in (log_filters or {}).items() if v is not None}
    waker = EventWaker(session, {"trial_id": trial_id, "types": "log,trial"}).start()
    try:
        while True:
            # Read the state before the logs: once a terminal state is seen, the logs read after
            # it contain everything the trial wrote.
            trial = session.get(f"/trials/{trial_id}")["trial"]
            while True:
                logs = session.get(
                    f"/trials/{trial_id}/logs", {"after_id": after_id, "limit": 1000, **filters}
                )["logs"]
                print_logs(logs, as_json=as_json, write=write)
                if logs:
                    after_id = max(after_id, max(int(log["id"]) for log in logs))
                if len(logs) < 1000:
                    break
            if on_poll is not None:
                on_poll()
            if trial["state"] in TERMINAL_TRIAL_STATES:
                return trial
            waker.wait(interval)
    finally:
        waker.close()


def wait_for_first_trial(
    session: api.Session, experiment_id: int, *, interval: float = 1.0
) -> dict | None:
    """The experiment's lowest-id trial once it exists; None if the experiment ends without one."""
    waker = EventWaker(
        session, {"experiment_id": experiment_id, "types": "experiment,trial"}
    ).start()
    try:
        while True:
            trials = session.get(f"/experiments/{experiment_id}/trials")["trials"]
            if trials:
                return min(trials, key=lambda t: t["id"])
            experiment = session.get(f"/experiments/{experiment_id}")["experiment"]
            if experiment["state"] in TERMINAL_EXPERIMENT_STATES:
                return None
            waker.wait(interval)
    finally:
        waker.close()


def wait_for_experiment(
    session: api.Session,
    experiment_id: int,
    *,
    interval: float = 1.0,
    on_poll: Callable[[dict], None] | None = None,
    use_events: bool = True,
) -> dict:
    """Poll until the experiment is in a terminal state; return it."""
    waker = (
        EventWaker(session, {"experiment_id": experiment_id, "types": "experiment"}).start()
        if use_events
        else None
    )
    try:
        while True:
            experiment = session.get(f"/experiments/{experiment_id}")["experiment"]
            if on_poll is not None:
                on_poll(experiment)
            if experiment["state"] in TERMINAL_EXPERIMENT_STATES:
                return experiment
            if waker is not None:
                waker.wait(interval)
            else:
                time.sleep(interval)
    finally:
        if waker is not None:
            waker.close()


def follow_experiment(
    session: api.Session, experiment_id: int, *, out: TextIO | None = None
) -> int:
    """`det e create -f`: follow the first trial's logs with a progress bar until the experiment
    ends. Returns the exit code: 0 for COMPLETED, 1 otherwise."""
    out = out or sys.stdout
    print("Waiting for first trial to begin...", file=out, flush=True)
    first = wait_for_first_trial(session, experiment_id)
    bar = _render.ProgressBar(f"Experiment {experiment_id}")

    def refresh_progress(experiment: dict | None = None) -> None:
        if experiment is None:
            experiment = session.get(f"/experiments/{experiment_id}")["experiment"]
        bar.update(experiment.get("progress"))

    try:
        if first is not None:
            bar.write(f"Following first trial with ID {first['id']}", out)
            follow_trial(
                session,
                first["id"],
                write=lambda line: bar.write(line, out),
                on_poll=refresh_progress,
            )
        experiment = wait_for_experiment(session, experiment_id, on_poll=refresh_progress)
    finally:
        bar.close()
    return report_final_state(experiment, first["id"] if first else None, out=out)


def report_final_state(experiment: dict, trial_id: int | None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    state = experiment["state"]
    if state == "COMPLETED":
        print(f"Experiment {experiment['id']} completed.", file=out)
        return 0
    hint = f" See the logs with: det trial logs {trial_id}" if trial_id is not None else ""
    print(f"Experiment {experiment['id']} ended in state {state}.{hint}", file=sys.stderr)
    return 1
