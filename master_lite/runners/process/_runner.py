"""The process runner: each trial run as a local subprocess in its own process group.

The run's environment is the master's with the run's own variables over it
(`process_environment`), and `python3` at the head of its argv is the master's interpreter (whose
environment has `determined`). With `LaunchSpec.run_as` the process starts as that Unix user
(the master must then be root).

A `python3 <script.py>` entrypoint runs in a pre-started interpreter when one is ready (see
`_prestart`): same process group, pipes and exit status, without the start-up on the trial's
clock.

Output is captured line by line by one reader thread per stream (both "\\n" and "\\r" end a
line, so progress bars become lines), handed in batches to `log_sink`, and the exit status is
reported on the event loop thread once every line has been handed over — so the exit event
never overtakes the trial's last log lines.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from master_lite.runners._base import LaunchSpec, LogRecord, RunAs, Runner, terminate_with_grace
from master_lite.runners._exits import exit_code_of
from master_lite.runners._lines import MAX_LINE_BYTES, read_lines, split_line
from master_lite.runners._startup_hook import has_startup_hook, with_startup_hook
from master_lite.runners.process._prestart import (
    DEFAULT_SPARES,
    SPARES_ENV,
    PlainPythonLaunch,
    Spare,
    SparePool,
    plain_python_launch,
    send_launch,
)
from master_lite.runners.process._sandbox import Sandbox

_LEGACY_TRIAL_CLASS = re.compile(r"^[A-Za-z0-9_.]+:[A-Za-z0-9_]+$")
# The word at the head of an argv that means "this place's Python 3" (see `entrypoint_argv`).
PYTHON = "python3"


def entrypoint_argv(entrypoint: str | list[str], python: str = sys.executable) -> list[str]:
    """The command that runs a config's `entrypoint`, the way Determined reads it.

    A list is exec'd as given; a string is run by `sh -c`, except a legacy Trial class
    (`model_def:MyTrial`), which the harness runs, and a lone `.ipynb` path, which papermill runs.
    """
    if isinstance(entrypoint, list):
        if not entrypoint:
            raise ValueError("entrypoint: an empty list cannot be run")
        return [str(part) for part in entrypoint]
    if _LEGACY_TRIAL_CLASS.match(entrypoint):
        return [python, "-m", "determined.exec.harness", entrypoint]
    words = shlex.split(entrypoint)
    if len(words) == 1 and words[0].endswith(".ipynb"):
        # A notebook is the trial: papermill runs it with this trial's hparams injected.
        return [python, "-m", "determined.exec.notebook", words[0]]
    return ["sh", "-c", entrypoint]


# Variables of the master's environment that may hold the user's token (the hosted master's
# user token is Jupyter's): never passed on to a run, which gets its own trial token.
USER_SECRET_VARIABLES = (
    "DET_MASTER_TOKEN",
    "JUPYTER_TOKEN",
    "JUPYTERHUB_API_TOKEN",
    "JPY_API_TOKEN",
)


# The master's own secrets and a JupyterHub service's variables (its Hub token, OAuth client
# settings): never passed on to a run either (issue 29, docs/team.md "What runs as whom").
MASTER_SECRET_VARIABLES = (
    "MASTER_LITE_KERNEL_GATEWAY_TOKEN",
    "JUPYTER_GATEWAY_AUTH_TOKEN",
)
MASTER_SECRET_PREFIXES = ("JUPYTERHUB_",)


def process_environment(own: dict[str, str], python: str | None = None) -> dict[str, str]:
    """The environment of a run as a local process: the master's (without the variables that
    may hold the user's token, `USER_SECRET_VARIABLES`, nor the master's secrets,
    `MASTER_SECRET_VARIABLES`/`MASTER_SECRET_PREFIXES`), then the run's `own`. `python`: the
    run's interpreter (default: the master's), whose directory heads PATH."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in USER_SECRET_VARIABLES
        and name not in MASTER_SECRET_VARIABLES
        and not name.startswith(MASTER_SECRET_PREFIXES)
    }
    env.pop("DET_LATEST_CHECKPOINT", None)
    # `python3` in an entrypoint must be the run's interpreter (its venv has determined).
    python_dir = os.path.dirname(python or sys.executable)
    env["PATH"] = python_dir + os.pathsep + env.get("PATH", "")
    env.update(own)
    return env


def local_argv(argv: list[str], work_dir: Path, python: str | None = None) -> list[str]:
    """A run's argv as a local process runs it: `python3` is the run's interpreter (`python`,
    default the master's), and a context's startup hook is sourced first (in `sh`), as
    Determined's container entrypoint does."""
    if argv and argv[0] == PYTHON:
        argv = [python or sys.executable, *argv[1:]]
    if has_startup_hook(work_dir):
        argv = with_startup_hook(argv, shell=None)
    return argv


# The umask of a run as another account: its files (checkpoints) are its own.
TRIAL_UMASK = 0o077


def account_environment(run_as: RunAs) -> dict[str, str]:
    """HOME, USER and LOGNAME of `run_as`'s account (empty for a bare uid without a name)."""
    try:
        entry = pwd.getpwnam(run_as.user) if run_as.user else pwd.getpwuid(run_as.uid or 0)
    except KeyError:
        return {}
    return {"HOME": entry.pw_dir, "USER": entry.pw_name, "LOGNAME": entry.pw_name}


def _user_arguments(run_as: RunAs | None) -> dict[str, Any]:
    """Popen's `user`/`group`/`extra_groups` for `run_as` (empty: the master's own account).

    A named user without explicit groups gets its own supplementary groups, as a login would;
    starting a process as another user needs root (PermissionError, an OSError, otherwise)."""
    if run_as is None:
        return {}
    uid, gid, groups = run_as.ids()
    args: dict[str, Any] = {"user": uid, "extra_groups": list(groups)}
    if gid is not None:
        args["group"] = gid
    return args


@dataclasses.dataclass
class _Running:
    spec: LaunchSpec
    process: subprocess.Popen
    readers: list[threading.Thread]


class LocalRunner(Runner):
    """Runs each trial as a local process group (with pre-started interpreters when it can)."""

    def __init__(
        self,
        *,
        log_sink: Callable[[list[LogRecord]], None],
        on_exit: Callable[[str, int], None],
        loop: Any = None,
        prestarted: int | None = None,
    ) -> None:
        """`on_exit(allocation_id, exit_code)` runs on `loop` (call_soon_threadsafe) if given.

        `prestarted`: how many pre-started interpreters to keep for `python3 <script.py>`
        entrypoints (see `_prestart`); default $MASTER_LITE_PRESTARTED_INTERPRETERS, else 2;
        0 turns them off."""
        super().__init__(log_sink=log_sink, on_exit=on_exit)
        self._loop = loop
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()
        if prestarted is None:
            prestarted = _spares_from_environment()
        self.spare_pool = SparePool(prestarted) if prestarted > 0 else None
        # Runs as the master's user start sandboxed, hiding `LaunchSpec.hidden` (_sandbox).
        self.sandbox = Sandbox()

    def running(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def pid_of(self, allocation_id: str) -> int | None:
        with self._lock:
            running = self._running.get(allocation_id)
        return running.process.pid if running else None

    def launch(self, spec: LaunchSpec) -> int:
        """Start the run; returns its pid (which is also its process group id).

        A run as the master's own user starts in the sandbox (`_sandbox`) that hides
        `spec.hidden`; one as another user (`run_as`) needs none: that uid cannot read them.
        Such a run has that user's HOME, USER and LOGNAME, and umask 077 (what it writes,
        checkpoints included, is its own)."""
        argv = local_argv(spec.argv, Path(spec.work_dir), spec.python)
        env = process_environment(spec.env, spec.python)
        user_args = _user_arguments(spec.run_as)
        if spec.run_as is not None:
            env.update(account_environment(spec.run_as))
            env.update(spec.env)  # the run's own variables still win
            user_args["umask"] = TRIAL_UMASK
        wrapper = self.sandbox.prefix(spec.hidden) if spec.run_as is None else []
        spec = dataclasses.replace(spec, argv=argv, env=env)
        return self.launch_process(spec, wrapper=wrapper, **user_args)

    def launch_process(
        self, spec: LaunchSpec, *, wrapper: list[str] | None = None, **popen_args: Any
    ) -> int:
        """Start `spec.argv` as it is, with `spec.env` as its whole environment (what
        `launch` made of the run, or a container runtime's client): its pid, also its group.

        `wrapper`: an argv prefix the run starts under (the sandbox's trampoline), pre-started
        interpreters included. `popen_args`: Popen's `user`/`group`/`extra_groups`; a run with
        them never takes a pre-started interpreter (those run as the master)."""
        wrapper = list(wrapper or ())
        handover: tuple[Spare, PlainPythonLaunch] | None = None
        if self.spare_pool is not None and not popen_args:
            plain = plain_python_launch(spec.argv, spec.env, wrapper)
            if plain is not None:
                spare = self.spare_pool.take(plain, spec.env, Path(spec.work_dir).resolve().parent)
                if spare is not None:
                    handover = (spare, plain)  # _wait hands it the allocation
        if handover is not None:
            process = handover[0].process
        else:
            process = subprocess.Popen(
                [*wrapper, *spec.argv],
                cwd=spec.work_dir,
                env=spec.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                **popen_args,
            )
        readers = [
            threading.Thread(
                target=self._read_stream,
                args=(spec, process.stdout, "stdout"),
                name=f"logs-{spec.allocation_id}-stdout",
                daemon=True,
            ),
            threading.Thread(
                target=self._read_stream,
                args=(spec, process.stderr, "stderr"),
                name=f"logs-{spec.allocation_id}-stderr",
                daemon=True,
            ),
        ]
        with self._lock:
            self._running[spec.allocation_id] = _Running(spec, process, readers)
        for reader in readers:
            reader.start()
        threading.Thread(
            target=self._wait,
            args=(spec.allocation_id, handover),
            name=f"wait-{spec.allocation_id}",
            daemon=True,
        ).start()
        return process.pid

    def _read_stream(self, spec: LaunchSpec, stream: Any, name: str) -> None:
        read_lines(stream, lambda lines: self._emit(spec, name, lines))

    def _emit(self, spec: LaunchSpec, stream_name: str, raw_lines: list[bytes]) -> None:
        if not raw_lines:
            return
        now = time.time()
        records: list[LogRecord] = []
        for raw in raw_lines:
            for rank, text in split_line(raw):
                records.append((spec.trial_id, rank, stream_name, now, text))
        try:
            self._log_sink(records)
        except Exception:  # a failing sink must not kill the capture (the process would block)
            pass

    def _wait(
        self, allocation_id: str, handover: tuple[Spare, PlainPythonLaunch] | None = None
    ) -> None:
        with self._lock:
            running = self._running[allocation_id]
        if handover is not None:
            spare, plain = handover
            try:
                send_launch(spare, plain, running.spec.env, running.spec.work_dir)
            except OSError as exc:  # it died between take() and now; its exit status follows
                self._emit(
                    running.spec,
                    "master",
                    [
                        f"the pre-started interpreter for {allocation_id} exited before it was "
                        f"handed the trial ({exc})".encode()
                    ],
                )
        code = running.process.wait()
        # Children left behind in the group would hold the pipes open; the run is over.
        _killpg(running.process.pid, signal.SIGKILL)
        for reader in running.readers:
            reader.join(timeout=10)
        with self._lock:
            self._running.pop(allocation_id, None)
        exit_code = exit_code_of(code)
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._on_exit, allocation_id, exit_code)
            except RuntimeError:  # loop closed: the master is gone
                pass
        else:
            self._on_exit(allocation_id, exit_code)

    def close(self) -> None:
        """Retire the pre-started interpreters (running trials are not touched)."""
        if self.spare_pool is not None:
            self.spare_pool.close()

    def send_signal(self, allocation_id: str, sig: int) -> bool:
        pid = self.pid_of(allocation_id)
        return pid is not None and _killpg(pid, sig)

    def kill(self, allocation_id: str) -> bool:
        return self.send_signal(allocation_id, signal.SIGKILL)

    def terminate(self, allocation_id: str, grace: float) -> bool:
        """SIGTERM the group, then SIGKILL it if it is still running after `grace` seconds."""
        pid = self.pid_of(allocation_id)
        if pid is None:
            return False

        def stop() -> bool:
            _killpg(pid, signal.SIGTERM)  # a group already gone ends its run by itself
            return True

        return terminate_with_grace(
            stop,
            lambda: self.pid_of(allocation_id) == pid,
            lambda: _killpg(pid, signal.SIGKILL),
            grace,
        )


def _spares_from_environment() -> int:
    raw = os.environ.get(SPARES_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_SPARES
    try:
        return max(0, int(raw))
    except ValueError:
        raise ValueError(
            f"{SPARES_ENV}={raw!r}: expected a number of interpreters (0 turns "
            "pre-started interpreters off)"
        ) from None


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command name: state, ppid, pgrp, ...
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def kill_orphaned_group(pgid: int, allocation_id: str) -> bool:
    """SIGKILL a process group left by a previous master, if it still runs that allocation.

    A recorded pgid may have been reused by an unrelated process (e.g. after a reboot), so on
    Linux a member must carry `DET_ALLOCATION_ID=<allocation_id>` in its environment. Where
    /proc is missing the check cannot be made and the group is killed.
    """
    if Path("/proc/self/environ").exists():
        marker = f"DET_ALLOCATION_ID={allocation_id}".encode()
        owned = False
        for pid in _group_members(pgid):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                owned = True
                break
        if not owned:
            return False
    return _killpg(pgid, signal.SIGKILL)


__all__ = [
    "LocalRunner",
    "MAX_LINE_BYTES",
    "PYTHON",
    "entrypoint_argv",
    "kill_orphaned_group",
    "local_argv",
    "process_environment",
    "account_environment",
    "process_group_alive",
]
