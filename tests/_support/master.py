"""A real `python -m master_lite` process for end-to-end tests, and helpers to drive it.

Usage::

    from tests._support import MasterProcess, context_tarball, wait_for_experiment

    with MasterProcess(tmp_path / "root") as master:
        exp_id = master.create_experiment(config_text, context_tarball({"train.py": SCRIPT}))
        wait_for_experiment(master, exp_id, {"COMPLETED"})

The master runs in its own session (process group) so a test can SIGKILL it alone and leave its
trials orphaned, as a crash would. `restart()` starts a new master on the same root dir. The
helpers below take the master or its `Session`.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sqlite3
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

from determined.common.api import Session
from tests._support.context import context_tarball
from tests._support.process import ServerProcess, child_env
from tests._support.states import TERMINAL_EXPERIMENT_STATES
from tests._support.waiting import wait_until


class MasterProcess(ServerProcess):
    """`python -m master_lite --port 0 --root-dir ROOT`, started by the constructor.

    Args:
        root_dir: the master's root directory (database, checkpoints, master.json, master.log).
        cpu_slots: `--cpu-slots`; None leaves it to the master (its environment, GPUs).
        extra_args: more command-line arguments.
        env: environment variables on top of `child_env()`.
        start_timeout: seconds to wait for master.json.
        preexec_fn: run in the child before the master starts (e.g. to set a resource limit).
    """

    name = "master-lite"

    def __init__(
        self,
        root_dir: pathlib.Path,
        *,
        cpu_slots: int | None = 2,
        extra_args: list[str] | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout: float = 90,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.root_dir = pathlib.Path(root_dir)
        super().__init__(self.root_dir / "master.log", preexec_fn)
        self.cpu_slots = cpu_slots
        self.extra_args = list(extra_args or [])
        self.env = dict(env or {})
        self.session: Session = None  # type: ignore[assignment]
        self.url = ""
        self.token = ""
        self.start(start_timeout)

    # -- process ------------------------------------------------------------------------------
    def command(self) -> list[str]:
        slots = [] if self.cpu_slots is None else ["--cpu-slots", str(self.cpu_slots)]
        return [
            sys.executable,
            "-m",
            "master_lite",
            "--port",
            "0",
            "--root-dir",
            str(self.root_dir),
            *slots,
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        return child_env(self.env)

    def _info(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.root_dir / "master.json").read_text()))
        except (OSError, ValueError):  # not there yet, or being written
            return {}

    def ready(self) -> bool:
        return self._info().get("pid") == self.pid

    def start(self, timeout: float = 90) -> None:
        """Start a master on `root_dir` and open `session` to it."""
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.launch(timeout, interval=0.05)
        info = self._info()
        # The token is beside master.json, in a file only this Unix user may read.
        self.url = info["url"]
        self.token = info.get("token") or pathlib.Path(info["token_file"]).read_text().strip()
        self.session = Session(self.url, self.token)

    def restart(self) -> None:
        """Start a new master on the same root dir (after `stop()` or `kill()`)."""
        self.start()

    def closed(self) -> None:
        if self.session is not None:
            try:
                self.session.close()
            except Exception:
                pass

    def __enter__(self) -> MasterProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._kill_leftover_trials()

    def _kill_leftover_trials(self) -> None:
        """Whatever a SIGKILLed master left and no later master cleaned up."""
        for row in self.db_rows("SELECT pgid FROM allocations WHERE end_time IS NULL"):
            if row["pgid"]:
                try:
                    os.killpg(row["pgid"], signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    # -- API ----------------------------------------------------------------------------------
    def create_experiment(self, config: str | dict, context: str | None = None, **body: Any) -> int:
        """POST /experiments; returns the new experiment's id."""
        answer = self.session.post("/experiments", {"config": config, "context": context, **body})
        return int(answer["experiment"]["id"])

    def trials(self, exp_id: int) -> list[dict]:
        """The experiment's trials."""
        return trials(self.session, exp_id)

    def series(self, trial_id: int, group: str) -> list[tuple[int, dict]]:
        """(steps_completed, metrics) of a trial's reports of one group."""
        reports = self.session.get(f"/trials/{trial_id}/metrics", {"group": group})["metrics"]
        return [(r["steps_completed"], r["metrics"]) for r in reports]

    def logs(self, trial_id: int) -> list[str]:
        """A trial's log lines."""
        return [entry["line"] for entry in trial_logs(self.session, trial_id)]

    def db_rows(self, sql: str, params: tuple = ()) -> list[dict]:
        """Read the master's SQLite store directly (e.g. pids, which the API does not show)."""
        path = self.root_dir / "master.db"
        if not path.exists():
            return []
        conn = sqlite3.connect(path, timeout=30)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in conn.execute(sql, params)]
        finally:
            conn.close()


MasterLike = MasterProcess | Session


def _session(master: MasterLike) -> Session:
    return master.session if isinstance(master, MasterProcess) else master


def submit(
    master: MasterLike,
    config: Mapping[str, Any] | str,
    files: Mapping[str, str | bytes],
    *,
    dedent: bool = True,
) -> int:
    """Create an experiment from a config and the files of its context; returns its id.

    Args:
        master: the master or a session to it.
        config: the experiment config (a dict is sent as JSON text).
        files: the context, name -> content.
        dedent: dedent text contents (scripts written inline in a test).
    """
    text = config if isinstance(config, str) else json.dumps(config)
    body = {"config": text, "context": context_tarball(files, dedent=dedent)}
    return int(_session(master).post("/experiments", body)["experiment"]["id"])


def trials(master: MasterLike, exp_id: int) -> list[dict]:
    """GET /experiments/{id}/trials."""
    return list(_session(master).get(f"/experiments/{exp_id}/trials")["trials"])


def trial_logs(master: MasterLike, trial_id: int, **query: Any) -> list[dict]:
    """GET /trials/{id}/logs: the log entries (dicts with `line`, `rank`, ...)."""
    return list(_session(master).get(f"/trials/{trial_id}/logs", query or None)["logs"])


def all_logs(master: MasterLike, exp_id: int) -> str:
    """Every trial's log of an experiment, each line prefixed with its trial and rank."""
    lines = []
    for trial in trials(master, exp_id):
        lines += [
            f"[trial {trial['id']} rank={entry.get('rank')}] {entry['line']}"
            for entry in trial_logs(master, trial["id"])
        ]
    return "\n".join(lines)


def wait_for_experiment(
    master: MasterLike,
    exp_id: int,
    states: Collection[str] = TERMINAL_EXPERIMENT_STATES,
    timeout: float = 240,
    *,
    full: bool = False,
) -> dict:
    """Wait until an experiment is in one of `states` and return it (GET /experiments/{id}).

    PAUSED counts once the experiment is really paused: it reads PAUSED at once (Determined's
    contract) while its runs still checkpoint and exit (`run_state` STOPPING), and a test that
    acted on that early raced the run it paused.

    Args:
        master: the master or a session to it.
        exp_id: the experiment.
        states: the states awaited; by default the terminal ones.
        timeout: seconds; on timeout the failure shows the trial logs (and the master's log).
        full: return the whole answer (`experiment` and its `trials`), not only the experiment.
    """
    session = _session(master)

    def reached() -> dict | None:
        answer = session.get(f"/experiments/{exp_id}")
        experiment = answer["experiment"]
        if experiment["state"] not in states:
            return None
        if experiment["state"] == "PAUSED" and experiment.get("run_state") == "STOPPING":
            return None
        return dict(answer) if full else dict(answer["experiment"])

    def details() -> str:
        text = f"trial logs:\n{all_logs(session, exp_id)[-4000:]}"
        if isinstance(master, MasterProcess):
            text += f"\nmaster log:\n{master.log_text()[-3000:]}"
        return text

    return wait_until(
        reached, timeout, f"experiment {exp_id} to reach {sorted(states)}", 0.2, details=details
    )


def marked_values(text: str, marker: str) -> list[dict]:
    """JSON objects printed by trial scripts as `<marker> {...}` lines."""
    found = []
    for line in text.splitlines():
        _, sep, rest = line.partition(marker + " {")
        if sep:
            found.append(json.loads("{" + rest))
    return found
