"""Pre-started interpreters for `python3 <script.py>` entrypoints.

A trial's process spends ~0.2 s of CPU starting Python and importing `determined` and `requests`
before the user's code runs, and short trials pay it every time. For entrypoints of exactly the
shape `python3 <script.py> [plain args]` the runner keeps a few interpreters started ahead of
time (`determined/exec/prestarted.py`): each is started with the trial's environment minus the
variables that name one allocation (DET_*, CUDA_VISIBLE_DEVICES, the rendezvous ports), imports,
then waits on a control pipe; a launch hands one of them the allocation (environment, working
directory, argv) and it becomes that trial. Each interpreter is used for one trial only, so every
trial still gets its own process, hash seed and random state.

A launch uses a pre-started interpreter only when nothing its start-up read could differ from a
fresh one's: same interpreter word, identical environment apart from the per-allocation
variables, and a PYTHONPATH of absolute entries only (relative ones depend on the working
directory at start). Anything else, or no spare ready, starts a fresh process as before.
Spares are started when an eligible launch follows another within `IDLE_RETIRE_S` (never on an
idle master, nor for trials so long that a spare would wait minutes), refilled after each use,
retired after `IDLE_RETIRE_S` without an eligible launch, and exit on their own when the
master's end of their control pipe closes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

from determined.common import harness
from master_lite.runners._base import TRIAL_PORT_NAMES

# Two spares cover two launches arriving together (two slots freed at once); more only cost
# memory (~50 MB each) on machines where trials are rarely this short.
DEFAULT_SPARES = 2
SPARES_ENV = "MASTER_LITE_PRESTARTED_INTERPRETERS"
IDLE_RETIRE_S = 30.0
# The spare's program, from the `determined` package the master itself uses.
PRESTARTED_SCRIPT = harness.PRESTARTED_SCRIPT
# Room the spare's exec-time environment block keeps for the trial's DET_* variables (the
# experiment config among them), so that /proc/<pid>/environ can show the trial's environment.
ENV_RESERVE_VARIABLE = "DET_PRESTARTED_ENV_RESERVE"
ENV_RESERVE_BYTES = 64 * 1024
_INTERPRETERS = ("python3", "python")
_PLAIN_WORD = re.compile(r"^[A-Za-z0-9_./@%+=:,-]+$")
_PER_ALLOCATION = frozenset({"CUDA_VISIBLE_DEVICES", *TRIAL_PORT_NAMES})


def per_allocation_variable(name: str) -> bool:
    """Variables that differ between allocations and that nothing reads before the script runs."""
    return name.startswith("DET_") or name in _PER_ALLOCATION


@dataclasses.dataclass(frozen=True)
class PlainPythonLaunch:
    interpreter: str  # "python3" or "python", looked up on the trial's PATH
    script_argv: list[str]  # [script.py, *args]: the trial's sys.argv
    spare_env: dict[str, str]  # the trial's environment minus the per-allocation variables
    key: tuple  # spares started for one key serve only launches with that key
    wrapper: tuple[str, ...] = ()  # the argv prefix spares start under (the trial sandbox)


def plain_python_launch(
    argv: list[str], env: dict[str, str], wrapper: list[str] | tuple[str, ...] = ()
) -> PlainPythonLaunch | None:
    """The launch as a pre-started interpreter would run it, or None if it must start fresh.
    `wrapper`: the argv prefix the run starts under (spares then start under it too).

    `argv` is what `entrypoint_argv` made: `["sh", "-c", "python3 train.py --x 1"]` qualifies;
    anything with shell syntax (quotes, variables, redirections, `&&`, ...) does not.
    """
    if len(argv) != 3 or argv[0] != "sh" or argv[1] != "-c":
        return None
    words = argv[2].split()
    if len(words) < 2 or words[0] not in _INTERPRETERS:
        return None
    script = words[1]
    if not script.endswith(".py") or script.startswith("-"):
        return None
    if not all(_PLAIN_WORD.match(word) for word in words):
        return None
    pythonpath = env.get("PYTHONPATH")
    if pythonpath is not None and not all(
        entry and os.path.isabs(entry) for entry in pythonpath.split(os.pathsep)
    ):
        return None
    spare_env = {k: v for k, v in env.items() if not per_allocation_variable(k)}
    return PlainPythonLaunch(
        words[0],
        words[1:],
        spare_env,
        (words[0], tuple(sorted(spare_env.items())), tuple(wrapper)),
        tuple(wrapper),
    )


def environment_block_size(env: dict[str, str]) -> int:
    """Bytes of `env` as the kernel keeps it for a process ("NAME=value\\0" each)."""
    return sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in env.items())


@dataclasses.dataclass
class Spare:
    process: subprocess.Popen
    control_fd: int  # write end of the pipe the spare reads its launch from
    env_capacity: int  # the largest environment block it can show in /proc/<pid>/environ


def send_launch(
    spare: Spare, launch: PlainPythonLaunch, env: dict[str, str], work_dir: Path
) -> None:
    """Hand the allocation to the spare (blocking until the pipe took it all), then close the
    pipe. Raises OSError (BrokenPipeError) if the spare is gone."""
    payload = json.dumps(
        {
            "env": env,
            "cwd": str(work_dir),
            "argv": launch.script_argv,
            "interpreter": launch.interpreter,
            "shell_pwd": True,
        }
    ).encode()
    try:
        view = memoryview(payload)
        while view:
            written = os.write(spare.control_fd, view)
            view = view[written:]
    finally:
        os.close(spare.control_fd)


class SparePool:
    def __init__(self, size: int, *, idle_retire_s: float = IDLE_RETIRE_S) -> None:
        self.size = size
        self.idle_retire_s = idle_retire_s
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._spares: list[Spare] = []
        self._broken: set[tuple] = set()  # keys whose spares died unused: start fresh
        self._refilling = False
        self._last_use = 0.0
        self._retirer: threading.Thread | None = None
        self.script = PRESTARTED_SCRIPT

    def spares(self) -> list[Spare]:
        with self._lock:
            return list(self._spares)

    def take(self, launch: PlainPythonLaunch, env: dict[str, str], start_dir: Path) -> Spare | None:
        """A ready spare for `launch` with environment `env` (now owned by the caller), or
        None; refills either way."""
        taken = None
        # The block the spare shows must hold env plus the PWD the shell would export.
        needed = environment_block_size(env) + len(os.fsencode(str(start_dir))) + 256
        with self._lock:
            now = time.monotonic()
            # Spares pay off only when launches come often; long trials (a launch every few
            # minutes) would only ever see them retire unused, so a launch refills only when
            # another came within the idle time before it.
            frequent = now - self._last_use < self.idle_retire_s
            self._last_use = now
            if launch.key in self._broken:
                return None
            if launch.key != self._key:
                self._retire_locked()
                self._key = launch.key
            while self._spares and taken is None:
                spare = self._spares.pop(0)
                if spare.process.poll() is None:
                    if needed > spare.env_capacity:  # a huge config: start it fresh
                        self._spares.insert(0, spare)
                        break
                    taken = spare
                else:  # died before it was used: something in its start-up fails
                    self._discard(spare)
                    self._broken.add(launch.key)
                    self._retire_locked()
                    return None
            if frequent and not self._refilling:
                self._refilling = True
                threading.Thread(
                    target=self._refill,
                    args=(launch, start_dir),
                    name="prestart-refill",
                    daemon=True,
                ).start()
            if frequent and self._retirer is None:
                self._retirer = threading.Thread(
                    target=self._retire_when_idle, name="prestart-retire", daemon=True
                )
                self._retirer.start()
        return taken

    def close(self) -> None:
        with self._lock:
            self._retire_locked()
            self._key = None

    def _refill(self, launch: PlainPythonLaunch, start_dir: Path) -> None:
        try:
            while True:
                with self._lock:
                    if self._key != launch.key or len(self._spares) >= self.size:
                        return
                spare = self._start(launch, start_dir)
                with self._lock:
                    if self._key == launch.key and launch.key not in self._broken:
                        self._spares.append(spare)
                        continue
                self._discard(spare)
                return
        except OSError:
            with self._lock:
                self._broken.add(launch.key)
        finally:
            with self._lock:
                self._refilling = False

    def _start(self, launch: PlainPythonLaunch, start_dir: Path) -> Spare:
        env = dict(launch.spare_env)
        env[ENV_RESERVE_VARIABLE] = "x" * ENV_RESERVE_BYTES
        read_fd, write_fd = os.pipe()
        try:
            process = subprocess.Popen(
                [*launch.wrapper, launch.interpreter, self.script, str(read_fd)],
                cwd=start_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(read_fd,),
            )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        return Spare(process, write_fd, environment_block_size(env))

    def _retire_when_idle(self) -> None:
        while True:
            with self._lock:
                left = self._last_use + self.idle_retire_s - time.monotonic()
                if left <= 0:
                    self._retire_locked()
                    self._key = None
                    self._retirer = None
                    return
            time.sleep(left)

    def _retire_locked(self) -> None:
        spares, self._spares = self._spares, []
        for spare in spares:
            self._discard(spare)

    @staticmethod
    def _discard(spare: Spare) -> None:
        """Close its control pipe (it exits 0 on that end of file) and reap it in the background."""
        try:
            os.close(spare.control_fd)
        except OSError:
            pass

        def reap() -> None:
            try:
                spare.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spare.process.kill()
                spare.process.wait()
            for stream in (spare.process.stdout, spare.process.stderr):
                if stream is not None:
                    stream.close()

        threading.Thread(target=reap, name="prestart-reap", daemon=True).start()


__all__ = [
    "DEFAULT_SPARES",
    "ENV_RESERVE_BYTES",
    "ENV_RESERVE_VARIABLE",
    "IDLE_RETIRE_S",
    "SPARES_ENV",
    "PlainPythonLaunch",
    "Spare",
    "SparePool",
    "environment_block_size",
    "per_allocation_variable",
    "plain_python_launch",
    "send_launch",
]
