"""The TensorBoards part: TensorBoard processes the master starts, refreshes and stops.

A TensorBoard shows experiments' and trials' metrics: its log directory holds one run directory
per trial (`experiment_<id>/trial_<id>`, see `TrialLogdir`), written from the stored metric
reports and from the event files the trial wrote itself. While any of its trials may still
report, the directory is refreshed every `refresh_seconds`; TensorBoard reloads it on its own.

Each TensorBoard is a child process in its own session, serving on a free loopback port; the
master stops every one of them when it stops. They live as long as the master process: a
restarted master starts with none (their log directories are derived data, rebuilt on demand).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import logging
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from determined.common import storage
from determined.common.states import TERMINAL_EXPERIMENT_STATES, TERMINAL_TRIAL_STATES
from master_lite import errors
from master_lite._core import _serialize
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.store import OWNER_ID, MetricsQuery, Store, TrialRow
from master_lite.tensorboards._logdir import TrialLogdir, write_new_reports
from master_lite.tensorboards._process import (
    HOST,
    free_port,
    new_path_prefix,
    runs_tensorboard_of,
    serves,
    signal_group,
    spawn_tensorboard,
)

log = logging.getLogger("master_lite.tensorboards")

STARTING, RUNNING, TERMINATED = "STATE_STARTING", "STATE_RUNNING", "STATE_TERMINATED"
LOG_TAIL_CHARS = 2000
PID_FILE = "tensorboard.pid"


def experiment_files_dir(config: dict, experiment_id: int) -> Path | None:
    """Where the harness copies the own TensorBoard files of an experiment's trials
    (core/_tensorboard.py), or None when its checkpoint storage is not a local directory."""
    try:
        base = storage.checkpoint_base(config.get("checkpoint_storage") or {})
    except ValueError:
        return None
    return base / "tensorboard" / "experiment" / str(experiment_id)


def own_files_dir(config: dict, experiment_id: int, trial_id: int) -> Path | None:
    """Where the harness copies a trial's own TensorBoard files, or None (see
    `experiment_files_dir`)."""
    base = experiment_files_dir(config, experiment_id)
    return None if base is None else base / "trial" / str(trial_id)


@dataclasses.dataclass
class TensorBoard:
    """One TensorBoard process and its log directory."""

    id: str
    experiment_ids: list[int]
    trial_ids: list[int]  # asked for by id (an experiment's trials are looked up on refresh)
    directory: Path
    port: int
    registered_time: float
    state: str = STARTING
    error: str | None = None
    process: subprocess.Popen | None = None
    writing: asyncio.Future | None = None  # a refresh's file copy, in a thread
    runs: dict[int, TrialLogdir] = dataclasses.field(default_factory=dict)
    last_report_id: int = 0  # the last metric report written into `runs`
    watcher: asyncio.Task | None = None
    # Its secret path prefix (issue 26 row 8): only the master and whoever it gives the URL.
    path_prefix: str = dataclasses.field(default_factory=new_path_prefix)
    owner_id: int = OWNER_ID  # who launched it: only they or an admin may kill it

    @property
    def logdir(self) -> Path:
        return self.directory / "logs"

    @property
    def log_path(self) -> Path:
        return self.directory / "tensorboard.log"

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:].strip()
        except OSError:
            return ""


class TensorBoards:
    """Starts, lists, refreshes and stops the master's TensorBoards.

    Args:
        shared: the master's store, loop and root directory.
        views: experiment and trial rows, metric reads.
        refresh_seconds: how often the log directories of live trials are rewritten (and how
            often TensorBoard reloads them).
        module: the package that must be importable to start one (tests name a missing one).
    """

    def __init__(
        self,
        shared: MasterState,
        views: Views,
        *,
        refresh_seconds: float = 5.0,
        module: str = "tensorboard",
    ) -> None:
        self._shared = shared
        self._views = views
        self.refresh_seconds = refresh_seconds
        self.module = module
        self._boards: dict[str, TensorBoard] = {}
        self._proxy_base: str | None = None

    def serve_through(self, url_base: str) -> None:
        """TensorBoards are reached through a proxy at `<url_base>/<id>/` (Jupyter's), not
        directly at their loopback port."""
        self._proxy_base = url_base.rstrip("/")

    # -- reads --------------------------------------------------------------------------------
    def _board(self, tensorboard_id: str) -> TensorBoard:
        board = self._boards.get(tensorboard_id)
        if board is None:
            raise errors.NotFound(
                f"tensorboard {tensorboard_id} not found (GET /api/v1/tensorboards lists them)"
            )
        return board

    def _json(self, board: TensorBoard) -> dict:
        # Standalone, the URL with the secret prefix is the capability (given to API users);
        # hosted, only the proxy's URL behind Jupyter's login is given.
        direct = f"http://{HOST}:{board.port}{board.path_prefix}/"
        url = f"{self._proxy_base}/{board.id}/" if self._proxy_base else direct
        return {
            "id": board.id,
            "state": board.state,
            "experimentIds": list(board.experiment_ids),
            "trialIds": sorted(board.runs),
            "serviceAddress": url,
            "port": board.port,
            "registeredTime": _serialize.iso(board.registered_time),
            "error": board.error,
            # Determined's owner fields of a task (docs/team.md).
            "userId": board.owner_id,
            "username": self._shared.store.users.names().get(board.owner_id),
        }

    def get(self, tensorboard_id: str) -> dict:
        """One TensorBoard as API JSON."""
        return self._json(self._board(tensorboard_id))

    def list_all(self) -> list[dict]:
        """Every TensorBoard of this master, oldest first."""
        boards = sorted(self._boards.values(), key=lambda b: b.registered_time)
        return [self._json(board) for board in boards]

    def owner_of(self, tensorboard_id: str) -> tuple[int, str]:
        """(its owner's user id, how a 403 names it): for the owner-or-admin rule."""
        return self._board(tensorboard_id).owner_id, f"tensorboard {tensorboard_id}"

    def upstream(self, tensorboard_id: str) -> str:
        """The base URL of a running TensorBoard, secret path prefix included, without a
        trailing slash (`http://127.0.0.1:<port>/<secret>`), for the authenticated proxy to
        append a path to; Conflict while it is not running."""
        board = self._board(tensorboard_id)
        if board.state != RUNNING:
            detail = f": {board.error}" if board.error else ""
            raise errors.Conflict(
                f"tensorboard {tensorboard_id} is {board.state}, not STATE_RUNNING{detail}"
            )
        return f"http://{HOST}:{board.port}{board.path_prefix}"

    # -- start --------------------------------------------------------------------------------
    async def start(
        self, experiment_ids: list[int], trial_ids: list[int], *, owner_id: int = OWNER_ID
    ) -> dict:
        """Start a TensorBoard on the metrics of these experiments' trials and these trials,
        owned by `owner_id`; its JSON (STATE_STARTING: it serves a few seconds later)."""
        experiment_ids = sorted(set(int(e) for e in experiment_ids))
        trial_ids = sorted(set(int(t) for t in trial_ids))
        if not experiment_ids and not trial_ids:
            message = "experiment_ids, trial_ids: give at least one experiment or trial id"
            raise errors.InvalidRequest(message, [message])
        if importlib.util.find_spec(self.module) is None:
            message = (
                f"the {self.module!r} package is not installed in the master's Python "
                f"({sys.executable}); install it there (pip install tensorboard, or the "
                "package's 'tf' extra) and start the TensorBoard again"
            )
            raise errors.Unavailable(message, [message])
        for exp_id in experiment_ids:
            self._views.experiment_row(exp_id)  # NotFound names it
        for trial_id in trial_ids:
            self._views.trial_row(trial_id)
        self._check_something_to_show(experiment_ids, trial_ids)
        board_id = str(uuid.uuid4())
        board = TensorBoard(
            id=board_id,
            experiment_ids=experiment_ids,
            trial_ids=trial_ids,
            directory=self._shared.root_dir / "tensorboards" / board_id,
            port=free_port(),
            registered_time=time.time(),
            owner_id=owner_id,
        )
        board.logdir.mkdir(parents=True, exist_ok=True)
        self._boards[board.id] = board
        try:
            await self._refresh(board)
            if board.state == TERMINATED:  # killed (or the master stopped) meanwhile
                raise errors.Conflict(f"tensorboard {board.id} was stopped while it started")
            board.process = self._spawn(board)
        except BaseException:
            self._boards.pop(board.id, None)
            self._close_runs(board)
            shutil.rmtree(board.directory, ignore_errors=True)
            raise
        board.watcher = asyncio.ensure_future(self._watch(board))
        return self._json(board)

    def _check_something_to_show(self, experiment_ids: list[int], trial_ids: list[int]) -> None:
        """A finished trial with no metrics and no TensorBoard files of its own never will have
        any: asking for only such trials is a mistake worth saying."""
        problems = []
        for trial_id in trial_ids:
            trial = self._views.trial_row(trial_id)
            if trial.state in TERMINAL_TRIAL_STATES and not self._has_data(trial):
                problems.append(
                    f"trial_ids: trial {trial_id} is {trial.state} and has no metrics and no "
                    "TensorBoard files; nothing to show"
                )
        for exp_id in experiment_ids:
            experiment = self._views.experiment_row(exp_id)
            trials = self._shared.store.trials.of_experiment(exp_id)
            if experiment.state in TERMINAL_EXPERIMENT_STATES and not any(
                self._has_data(t) for t in trials
            ):
                problems.append(
                    f"experiment_ids: experiment {exp_id} is {experiment.state} and none of "
                    f"its {len(trials)} trials has metrics or TensorBoard files; nothing to show"
                )
        if problems:
            raise errors.InvalidRequest("; ".join(problems), problems)

    def _has_data(self, trial: TrialRow) -> bool:
        if self._views.get_metrics(MetricsQuery(trial_id=trial.id, limit=1)):
            return True
        config = self._views.experiment_row(trial.experiment_id).config
        own = own_files_dir(config, trial.experiment_id, trial.id)
        return own is not None and own.is_dir() and any(p.is_file() for p in own.rglob("*"))

    def _spawn(self, board: TensorBoard) -> subprocess.Popen:
        process = spawn_tensorboard(
            board.logdir,
            log_path=board.log_path,
            port=board.port,
            reload_seconds=max(1, round(self.refresh_seconds)),
            title=f"TensorBoard {board.id[:8]}",
            path_prefix=board.path_prefix,
        )
        # For the next master, should this one be killed before it could stop it.
        (board.directory / PID_FILE).write_text(str(process.pid))
        return process

    # -- refresh and watch --------------------------------------------------------------------
    def _trials(self, board: TensorBoard) -> list[TrialRow]:
        rows = {
            t.id: t
            for e in board.experiment_ids
            for t in self._shared.store.trials.of_experiment(e)
        }
        for trial_id in board.trial_ids:
            row = self._shared.store.trials.get(trial_id)
            if row is not None:
                rows[trial_id] = row
        return [rows[t] for t in sorted(rows)]

    def _forget_deleted(self, board: TensorBoard) -> None:
        """Stop following the experiments and trials deleted since the board started (what
        TensorBoard loaded of them stays shown until it is stopped)."""
        store = self._shared.store
        board.experiment_ids = [e for e in board.experiment_ids if store.experiments.get(e)]
        board.trial_ids = [t for t in board.trial_ids if store.trials.get(t)]
        for trial_id in [t for t in board.runs if store.trials.get(t) is None]:
            board.runs.pop(trial_id).close()

    async def _refresh(self, board: TensorBoard) -> bool:
        """Bring the log directory up to date; whether any of its trials may report more."""
        self._forget_deleted(board)
        trials = self._trials(board)
        for trial in trials:
            if trial.id not in board.runs:
                config = self._views.experiment_row(trial.experiment_id).config
                board.runs[trial.id] = TrialLogdir(
                    board.logdir / f"experiment_{trial.experiment_id}" / f"trial_{trial.id}",
                    own_files_dir(config, trial.experiment_id, trial.id),
                )
        live = any(t.state not in TERMINAL_TRIAL_STATES for t in trials) or any(
            self._views.experiment_row(e).state not in TERMINAL_EXPERIMENT_STATES
            for e in board.experiment_ids
        )
        # Reads and file work off the event loop, in pages (report ids only grow, so what is
        # new is after the last written): a trial's own event files may be large, and so may
        # its reports. A kill cancels the watcher, never this copy (a thread): `_stop` cleans
        # up after it.
        board.writing = asyncio.ensure_future(
            asyncio.to_thread(
                _write_all, self._shared.store, dict(board.runs), board.last_report_id
            )
        )
        # Only once written: a refresh that failed reads them again.
        board.last_report_id = await asyncio.shield(board.writing)
        return live

    async def _watch(self, board: TensorBoard) -> None:
        loop = asyncio.get_running_loop()
        live = True
        next_refresh = loop.time() + self.refresh_seconds
        while board.process is not None and board.state != TERMINATED:
            code = board.process.poll()
            if code is not None:
                board.state = TERMINATED
                board.error = f"TensorBoard exited with code {code}: {board.log_tail()}"
                log.warning("tensorboard %s: %s", board.id, board.error)
                return
            if board.state == STARTING and await serves(board.port, board.path_prefix):
                board.state = RUNNING
            if live and loop.time() >= next_refresh:
                try:
                    live = await self._refresh(board)
                except Exception:  # a refresh that failed is retried at the next one
                    log.exception("tensorboard %s: refreshing its log directory failed", board.id)
                next_refresh = loop.time() + self.refresh_seconds
            await asyncio.sleep(0.2 if board.state == STARTING else 1.0)

    # -- stop ---------------------------------------------------------------------------------
    def remove_leftovers(self) -> None:
        """Stop the TensorBoards a previous master of this root dir left running (it was killed
        before it could stop them) and remove every log directory it left."""
        root = self._shared.root_dir / "tensorboards"
        # Made now, while no trial runs: the trial sandbox covers it only if it exists when a
        # trial starts (MasterState.hidden_from_trials).
        root.mkdir(mode=0o700, exist_ok=True)
        for directory in root.iterdir():
            try:
                pid = int((directory / PID_FILE).read_text())
            except (OSError, ValueError):
                pid = 0
            if pid > 0 and runs_tensorboard_of(pid, directory):
                log.warning("stopping TensorBoard pid %s left by a previous master", pid)
                signal_group(pid, signal.SIGKILL)
            shutil.rmtree(directory, ignore_errors=True)

    async def kill(self, tensorboard_id: str) -> dict:
        """Stop a TensorBoard's process and remove its log directory; its last JSON."""
        board = self._board(tensorboard_id)
        await self._stop(board)
        self._boards.pop(board.id, None)
        return self._json(board)

    async def stop_all(self) -> None:
        """Stop every TensorBoard (the master stops)."""
        for board in list(self._boards.values()):
            await self._stop(board)
        self._boards.clear()

    async def _stop(self, board: TensorBoard) -> None:
        board.state = TERMINATED  # first: a start() still refreshing must not spawn it
        if board.watcher is not None:
            board.watcher.cancel()
        process = board.process
        if process is not None and process.poll() is None:
            signal_group(process.pid, signal.SIGTERM)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 5
            while process.poll() is None and loop.time() < deadline:
                await asyncio.sleep(0.05)
            if process.poll() is None:
                signal_group(process.pid, signal.SIGKILL)
                await asyncio.to_thread(process.wait)
        if process is not None and process.poll() is None:
            await asyncio.to_thread(process.wait)
        writing = board.writing
        if writing is not None and not writing.done():
            # A copy still writes into the directory: it goes once the copy is done.
            writing.add_done_callback(lambda _: self._remove(board))
        else:
            await asyncio.to_thread(self._remove, board)

    @classmethod
    def _remove(cls, board: TensorBoard) -> None:
        cls._close_runs(board)
        shutil.rmtree(board.directory, ignore_errors=True)

    @staticmethod
    def _close_runs(board: TensorBoard) -> None:
        for run in board.runs.values():
            run.close()


def _write_all(store: Store, runs: dict[int, TrialLogdir], after_id: int) -> int:
    """The new reports of the runs' trials after `after_id`, then the trials' own files; the
    last report id written."""
    last_id = write_new_reports(store, runs, after_id)
    for run in runs.values():
        run.copy_own_files()
    return last_id


__all__ = [
    "RUNNING",
    "STARTING",
    "TERMINATED",
    "TensorBoard",
    "TensorBoards",
    "experiment_files_dir",
    "own_files_dir",
]
