"""Warm kernels: a notebook trial's kernel started ahead of time, with the modules that the
previous trial of the same notebook imported already imported.

A torch notebook's trial spends nearly all of its time to the first metric importing (measured
on the shipped `pytorch_trial.ipynb`: torch, sklearn/scipy, and torch._dynamo, which
`torch.optim` imports lazily, make ~97% of it); its training steps take milliseconds. After a
local kernel trial succeeds, the runner remembers which modules its program imported from
outside the trial's work dir (installed packages and the standard library: never the
context's own files) and starts one spare kernel that imports them, silently, then waits. The
next launch of the same notebook takes that kernel instead of starting one (waiting for it if
it is still importing: it started earlier than a cold kernel would), and another is started
for the launch after; the program runs as in a fresh kernel and finds its imports done.

What makes a launch "the same" (the pool's key): the kernelspec, the trial's environment
minus the per-allocation variables (DET_*, CUDA_VISIBLE_DEVICES, the ports), the sandbox,
and a hash of every import statement of the entrypoint script, so editing a notebook's import
cell (or switching notebooks) starts cold and is learned anew. A warm kernel is also refused
(and shut down) when any file it imported changed since (a package upgraded or edited in
place), when it died, or after `idle_s` unused.

Why it cannot leak state between trials: a warm kernel serves exactly one trial and is never
reused; before the trial it has run only `import` of installed modules, in a private
namespace (the user namespace is a fresh kernel's); its environment, working directory and
/proc/<pid>/environ become the trial's before the program starts (as for pre-started
interpreters, `determined.exec.prestarted`). The seeds the harness sets per trial are set by
the program, after. Known differences from a cold kernel: those modules are imported before
the trial's DET_* variables exist (as for pre-started interpreters, nothing reads them at
import), and what importing them printed is not in the trial's log.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from master_lite.runners.process._prestart import (
    ENV_RESERVE_BYTES,
    ENV_RESERVE_VARIABLE,
    environment_block_size,
    per_allocation_variable,
)

log = logging.getLogger("master_lite.kernels")

WARM_ENV = "MASTER_LITE_WARM_KERNEL_IDLE_S"  # seconds a warm kernel waits; 0 turns them off
DEFAULT_IDLE_S = 300.0
# Below this many modules imported by the program, a cold kernel costs little more than a warm
# one (`import determined` alone is ~150 beyond a kernel's own): no spare is kept.
MIN_MODULES = 300
MAX_WARM = 2  # warm kernels held at most (each holds its imports' memory: ~400 MB with torch)
_READY_TIMEOUT = 300.0
_BASELINE = "_determined_warm_baseline"  # sys attribute: the modules before the program


def start_local_kernel(  # noqa: PLR0913 (all needed at start)
    host: Any, loop: Any, spec: str, env: dict[str, str], cwd: str, name: str, sandbox: list[str]
) -> Any:
    """A local kernel: through the hosting Jupyter server's kernel manager when there is one
    (`host` and its `loop`; a session called `name`), else a `LocalKernel` of our own."""
    from master_lite.runners.kernel._handles import LocalKernel, ServerKernel

    if host is not None and loop is not None:
        return ServerKernel(host, loop, spec, env, cwd, name, sandbox)
    return LocalKernel(spec, env, cwd, sandbox)


def rename_session(handle: Any, name: str) -> None:
    """Give a warm kernel of the hosting Jupyter server the trial's session name (as a cold
    `ServerKernel` gets at start); a failure only leaves the old name."""
    session_id = getattr(handle, "session_id", None)
    if session_id is None:
        return
    try:
        handle._call(
            handle._sessions.update_session(session_id, name=name, path=f"determined/{name}")
        )
    except Exception:  # noqa: BLE001 (a name for people; the trial runs without it)
        pass


def own_env(env: dict[str, str]) -> dict[str, str]:
    """A run's own variables without those that name its allocation (`per_allocation_variable`)."""
    return {k: v for k, v in env.items() if not per_allocation_variable(k)}


def script_of(run: Any) -> Path | None:
    """The script a kernel run's entrypoint runs (`python3 script.py`), else None."""
    from master_lite.runners.kernel._program import kernel_program

    try:
        program = kernel_program((run.spec.config or {}).get("entrypoint") or "")
    except ValueError:
        return None
    if program.kind != "path":
        return None
    return Path(run.spec.work_dir) / program.target


def idle_seconds() -> float:
    """How long a warm kernel waits for its launch ($MASTER_LITE_WARM_KERNEL_IDLE_S)."""
    raw = os.environ.get(WARM_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        return max(0.0, float(raw))
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %g", WARM_ENV, raw, DEFAULT_IDLE_S)
        return DEFAULT_IDLE_S


def imports_digest(script: Path) -> str | None:
    """A hash of every import statement of `script` (None: unreadable or not Python)."""
    try:
        tree = ast.parse(script.read_bytes(), str(script))
    except (OSError, SyntaxError, ValueError):
        return None
    digest = hashlib.sha256()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            digest.update(ast.dump(node).encode())
    return digest.hexdigest()


def warm_key(
    spec: str, env: dict[str, str], sandbox: list[str], script: Path | None
) -> tuple | None:
    """The pool key of a launch, or None where it never runs warm. `env`: the run's own
    variables without the per-allocation ones."""
    pythonpath = env.get("PYTHONPATH")
    if pythonpath is not None and not all(
        entry and os.path.isabs(entry) for entry in pythonpath.split(os.pathsep)
    ):
        return None  # relative entries would resolve elsewhere while the kernel waits
    digest = imports_digest(script) if script is not None else None
    if digest is None:
        return None
    return (spec, tuple(sorted(env.items())), tuple(sandbox), digest)


def baseline_cell() -> str:
    """Silent code run just before the program: remembers the modules already there."""
    return f"__import__('sys').{_BASELINE} = frozenset(__import__('sys').modules)"


def learn_expression(work_dir: str) -> str:
    """A user expression, evaluated after a successful program: the modules it imported from
    outside `work_dir`, in import order."""
    root = os.path.join(os.path.realpath(work_dir), "")
    # repr(): IPython's pretty printer would cut a long list short.
    return (
        "repr((lambda sys, os: [n for n, m in list(sys.modules.items()) "
        f"if n not in getattr(sys, {_BASELINE!r}, ()) and n != '__main__' "
        "and not os.path.realpath(getattr(m, '__file__', None) or '/').startswith("
        f"{root!r})])(__import__('sys'), __import__('os')))"
    )


def learned_modules(reply: dict) -> list[str]:
    """The module names `learn_expression` gave in an execute reply ([] if none)."""
    names = _expression(reply, "modules")
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


_PRELOAD = """
import importlib, os, sys
for name in MODULES:
    if name not in sys.modules:
        try:
            importlib.import_module(name)
        except BaseException:  # gone, or not importable by name (created at run time)
            pass
"""
_FILES_EXPRESSION = (
    "repr((lambda sys, os: {f: os.stat(f).st_mtime_ns for f in "
    "{getattr(m, '__file__', None) for m in list(sys.modules.values())} "
    "if isinstance(f, str) and os.path.isfile(f)})(__import__('sys'), __import__('os')))"
)
_COUNT_EXPRESSION = "len(__import__('sys').modules)"


def preload_cell(modules: list[str]) -> str:
    """Silent code importing `modules` in a private namespace (the user's stays empty)."""
    source = _PRELOAD.replace("MODULES", repr(modules))
    return f"exec(compile({source!r}, '<determined warm kernel>', 'exec'), {{}})"


# Kernel-side: write the trial's environment over the block the kernel shows as
# /proc/<pid>/environ (what the master reads to find its runs after a restart; proc(5): fields
# 50 and 51 of /proc/self/stat bound it). The kernel started with a reserve variable making
# room; nothing reads the block once os.environ was cleared and refilled (libc's environment
# then points to copies), as in the pre-started interpreter (determined/exec/prestarted.py).
_HANDOVER = """
import ctypes, importlib, os
kept = {k: v for k, v in os.environ.items() if k != RESERVE}
os.environ.clear()
os.environ.update(kept)
os.environ.update(ENV)
try:
    with open("/proc/self/stat", "rb") as stat_file:
        fields = stat_file.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])
except (OSError, IndexError, ValueError):
    start = end = 0
block = b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\\0" for k, v in os.environ.items())
if start and end - start >= len(block):
    ctypes.memmove(start, block + bytes(end - start - len(block)), end - start)
os.makedirs(WORK_DIR, exist_ok=True)
os.chdir(WORK_DIR)
importlib.invalidate_caches()
"""


def handover_cell(env: dict[str, str], work_dir: str) -> str:
    """Silent code making a warm kernel the trial's: its environment (os.environ and
    /proc/<pid>/environ) and working directory, and fresh import caches."""
    source = (
        f"RESERVE = {ENV_RESERVE_VARIABLE!r}\nENV = {env!r}\nWORK_DIR = {work_dir!r}\n" + _HANDOVER
    )
    return f"exec(compile({source!r}, '<determined warm kernel>', 'exec'), {{}})"


def run_quietly(handle: Any, code: str, user_expressions: dict, timeout: float) -> dict | None:
    """Execute `code` silently in `handle`; the reply's content, None if the kernel died or
    did not answer in `timeout` seconds. Output is dropped."""
    msg_id = handle.execute(code, silent=True, user_expressions=user_expressions)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        handle.iopub(0.1)  # drained: nobody else reads this kernel yet
        answer = handle.shell()
        if answer is not None and answer["parent_header"].get("msg_id") == msg_id:
            return dict(answer["content"])
        if not handle.alive():
            return None
    return None


def files_changed(files: dict[str, int]) -> bool:
    """Whether any file a warm kernel imported is gone or changed since."""
    for path, mtime in files.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


@dataclasses.dataclass
class WarmKernel:
    key: tuple
    handle: Any
    files: dict[str, int]  # every module file it imported -> its mtime then
    imported: int  # modules it imported ahead
    ready_at: float
    env_capacity: int  # the largest environment block it can show in /proc/<pid>/environ


Starter = Callable[[tuple, dict[str, str], str], Any]  # (key, env, cwd) -> a started handle


class WarmKernels:
    """At most `MAX_WARM` ready kernels, one per key; started in threads of their own."""

    def __init__(self, start: Starter, *, idle_s: float | None = None) -> None:
        """`start(key, env, cwd)`: a started kernel (a `KernelHandle`) for `key` in `cwd`."""
        self.idle_s = idle_seconds() if idle_s is None else idle_s
        self._start = start
        self._lock = threading.Lock()
        self._ready_changed = threading.Condition(self._lock)
        self._ready: list[WarmKernel] = []
        self._starting: set[tuple] = set()
        self._modules: dict[tuple, list[str]] = {}
        self._envs: dict[tuple, dict[str, str]] = {}
        self._closed = False
        self._start_dir = tempfile.mkdtemp(prefix="det-warm-kernels-")

    @property
    def enabled(self) -> bool:
        return self.idle_s > 0

    def ready(self) -> list[WarmKernel]:
        with self._lock:
            return list(self._ready)

    def take(self, key: tuple | None, env_size: int = 0) -> WarmKernel | None:
        """The warm kernel for `key` (now the caller's), or None: start cold. One still
        importing is waited for (it started earlier than a cold kernel would). A stale one
        (dead, a file it imported changed) is shut down; so is one whose environment block
        cannot show `env_size` bytes (the trial's environment) in /proc. After a good one,
        another is started for the next launch."""
        if key is None or not self.enabled:
            return None
        with self._ready_changed:
            deadline = time.monotonic() + _READY_TIMEOUT
            found = next((w for w in self._ready if w.key == key), None)
            while found is None and key in self._starting and time.monotonic() < deadline:
                self._ready_changed.wait(deadline - time.monotonic())
                found = next((w for w in self._ready if w.key == key), None)
            if found is not None:
                self._ready.remove(found)
        if found is None:
            return None
        if env_size > found.env_capacity:
            self._discard(found)
            return None
        if not found.handle.alive() or files_changed(found.files):
            self._discard(found)  # the trial that starts cold teaches a new one (`learned`)
            return None
        self._fill(key)
        return found

    def learned(self, key: tuple | None, env: dict[str, str], modules: list[str]) -> None:
        """A trial of `key` (own variables `env`, per-allocation ones left out) ended well
        having imported `modules`: keep a kernel with them imported for the next."""
        if key is None or not self.enabled:
            return
        with self._lock:
            known = self._modules.get(key, [])
            seen = set(known)
            self._modules[key] = known + [m for m in modules if m not in seen]
            self._envs[key] = env
        self._fill(key)

    def close(self) -> None:
        """Shut every warm kernel down; none is started after."""
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, []
        for warm in ready:
            self._discard(warm)
        shutil.rmtree(self._start_dir, ignore_errors=True)

    # -- filling ----------------------------------------------------------------------------
    def _fill(self, key: tuple) -> None:
        with self._lock:
            modules = self._modules.get(key, [])
            if (
                self._closed
                or len(modules) < MIN_MODULES
                or key in self._starting
                or any(w.key == key for w in self._ready)
            ):
                return
            self._starting.add(key)
            env = dict(self._envs[key])
        threading.Thread(
            target=self._warm_up, args=(key, env, modules), name="warm-kernel", daemon=True
        ).start()

    def _warm_up(self, key: tuple, env: dict[str, str], modules: list[str]) -> None:
        warm = handle = None
        try:
            env[ENV_RESERVE_VARIABLE] = "x" * ENV_RESERVE_BYTES
            handle = self._start(key, env, self._start_dir)
            before = _expression(run_quietly(handle, "", {"n": _COUNT_EXPRESSION}, 60), "n")
            reply = run_quietly(
                handle,
                preload_cell(modules),
                {"files": _FILES_EXPRESSION, "n": _COUNT_EXPRESSION},
                _READY_TIMEOUT,
            )
            files, after = _expression(reply, "files"), _expression(reply, "n")
            if not isinstance(files, dict) or not isinstance(after, int):
                handle.shutdown(now=True)
                return
            imported = after - before if isinstance(before, int) else after
            # Its block: the master's environment under `env` (`process_environment`).
            capacity = environment_block_size(env) + environment_block_size(dict(os.environ))
            warm = WarmKernel(key, handle, files, imported, time.time(), capacity)
        except Exception:  # noqa: BLE001 (a spare that fails to start only means a cold start)
            log.warning("a warm kernel failed to start", exc_info=True)
            if handle is not None:
                self._discard(WarmKernel(key, handle, {}, 0, 0.0, 0))
            return
        finally:
            with self._lock:
                self._starting.discard(key)
                self._ready_changed.notify_all()
                closed = self._closed
                if warm is not None and not closed:
                    self._ready.append(warm)
                    extra = self._ready[:-MAX_WARM] if len(self._ready) > MAX_WARM else []
                    self._ready = self._ready[len(extra) :]
                else:
                    extra = [warm] if warm is not None else []
        for old in extra:
            self._discard(old)
        if warm is not None and not closed:
            timer = threading.Timer(self.idle_s, self._retire, args=(warm,))
            timer.daemon = True
            timer.start()

    def _retire(self, warm: WarmKernel) -> None:
        with self._lock:
            if warm not in self._ready:
                return  # taken (or retired) meanwhile
            self._ready.remove(warm)
        self._discard(warm)

    @staticmethod
    def _discard(warm: WarmKernel) -> None:
        try:
            warm.handle.shutdown(now=True)
        except Exception:  # noqa: BLE001 (already gone)
            pass


def _expression(reply: dict | None, name: str) -> Any:
    if reply is None:
        return None
    value = ((reply.get("user_expressions") or {}).get(name) or {}).get("data", {})
    try:
        found = ast.literal_eval(value.get("text/plain", "None"))
        # The expressions that return much give their repr (a string holding a literal).
        return ast.literal_eval(found) if isinstance(found, str) else found
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


__all__ = [
    "environment_block_size",
    "own_env",
    "rename_session",
    "script_of",
    "start_local_kernel",
    "DEFAULT_IDLE_S",
    "MIN_MODULES",
    "WARM_ENV",
    "WarmKernel",
    "WarmKernels",
    "baseline_cell",
    "handover_cell",
    "idle_seconds",
    "imports_digest",
    "learn_expression",
    "learned_modules",
    "warm_key",
]
