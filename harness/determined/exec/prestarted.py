"""A pre-started interpreter that becomes one trial's `python3 <script.py> [args]`.

The master's local runner starts this ahead of time, with the trial's environment minus the
variables that name the allocation, so that the interpreter start-up and the imports every Core
API trial pays for (`determined`, `determined.core`, `requests`: ~0.2 s of CPU) happen while the
previous trial still runs (as is the Core API's report courier process,
`determined.core._courier.prestart_child`). When a trial is launched, the runner writes the launch (its whole
environment, working directory and argv) as JSON to the control pipe whose fd number is our
argv[1]; from then on this process is the trial: its pid, process group, stdin/stdout/stderr
pipes and exit status are the ones the runner gave it at start.

What a fresh `python3 train.py` would see, this reproduces: `os.environ` is replaced by the
trial's environment, the working directory, `sys.argv`/`sys.orig_argv` and `sys.path[0]` are
the script's, and the script runs as a new `__main__` module compiled from its file, so
`__file__`, pickling by `__main__`, `if __name__ == "__main__":` and uncaught-exception output
(the script's frames only, exit status 1) behave the same. Everything interpreter start-up
reads from the environment (PYTHON*, locale, HOME, ...) was the trial's already: the runner uses
a pre-started interpreter only when those variables are identical; /proc/<pid>/environ shows the
trial's environment too (the master finds its runs there). Known differences: the interpreter
has `determined` and `requests` imported before the script starts, it already has one child
process (the report courier, idle until the script's first report), and the frame that runs
the script is below the script's top-level frame.

An end of file on the control pipe before a launch (the master retired us, or died) exits 0.
This file must import nothing at module level beyond what `python3 train.py` itself loads.
"""

import sys
from collections.abc import Mapping


def _read_launch(fd: int) -> bytes:
    import os

    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _preload() -> None:
    # What a Core API trial imports anyway; `requests` is what its first HTTP request imports.
    import requests  # noqa: F401

    import determined  # noqa: F401
    import determined.common.api  # noqa: F401
    import determined.core  # noqa: F401
    from determined.core import _courier

    # The process that will post the trial's reports, started now (its start-up is ~40 ms).
    _courier.prestart_child()

    import ctypes  # noqa: F401 - `_show_environment_in_proc` needs it on the trial's clock

    # What was just imported lives as long as the process: keep it out of the collector's
    # generations, so the trial's collections (and the one at exit, ~40 ms with these modules)
    # only walk the trial's own objects. Objects the trial creates are collected as usual.
    import gc

    gc.freeze()


def _show_environment_in_proc(environ: Mapping[str, str]) -> None:
    """Write the trial's environment over the block the kernel shows as /proc/<pid>/environ.

    That block is the environment this process was exec'ed with, and the master finds its runs
    (after a restart, to end orphans) by the DET_SESSION_TOKEN it reads there. The runner starts
    us with a padding variable that reserves room; `os.environ.clear()` has already dropped every
    C-level pointer into the block, so nothing else reads it. The rest is zero-filled (empty
    entries to a reader that splits on NUL). Does nothing where the block cannot be found or is
    too small (the runner only hands us environments that fit).
    """
    import os

    try:
        with open("/proc/self/stat", "rb") as stat_file:
            fields = stat_file.read().rsplit(b")", 1)[1].split()
        # proc(5): env_start and env_end are fields 50 and 51; fields[0] is field 3.
        start, end = int(fields[47]), int(fields[48])
    except (OSError, IndexError, ValueError):
        return
    block = b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in environ.items())
    if not start or end - start < len(block):
        return
    import ctypes

    ctypes.memmove(start, block + bytes(end - start - len(block)), end - start)


def _variables_set_by_startup() -> dict:
    """What the interpreter added to its environment while starting (PEP 538 locale coercion
    sets LC_CTYPE when the locale is C): a fresh trial interpreter would add the same, since
    the runner only hands us launches with the locale variables we started with."""
    import os

    try:
        with open("/proc/self/environ", "rb") as environ_file:
            names = {entry.split(b"=", 1)[0] for entry in environ_file.read().split(b"\0")}
    except OSError:
        return {}
    return {k: v for k, v in os.environ.items() if k == "LC_CTYPE" and os.fsencode(k) not in names}


def _become_trial(launch: dict) -> None:
    import builtins
    import importlib.machinery
    import os
    import types

    added_by_startup = _variables_set_by_startup()
    os.environ.clear()  # also unsets the reserve variable (see `_show_environment_in_proc`)
    os.environ.update(launch["env"])
    for name, value in added_by_startup.items():
        os.environ.setdefault(name, value)
    os.chdir(launch["cwd"])
    if launch.get("shell_pwd"):
        # The launch replaces `sh -c "python3 ..."`, and the shell exports PWD as the (physical)
        # working directory before it runs the interpreter.
        os.environ["PWD"] = os.getcwd()
    _show_environment_in_proc(os.environ)
    argv = [str(a) for a in launch["argv"]]
    path = os.path.abspath(argv[0])
    sys.argv = argv
    sys.orig_argv = [str(launch["interpreter"]), *argv]
    sys.path.insert(0, os.path.dirname(path))

    main = types.ModuleType("__main__")
    main.__dict__.update(
        __annotations__={},
        __builtins__=builtins,
        __cached__=None,
        __file__=path,
        __loader__=importlib.machinery.SourceFileLoader("__main__", path),
        __package__=None,
        __spec__=None,
    )
    sys.modules["__main__"] = main
    try:
        with open(path, "rb") as source_file:
            source = source_file.read()
    except OSError as exc:  # the interpreter's own message and status for a missing script
        sys.stderr.write(
            f"{sys.orig_argv[0]}: can't open file {path!r}: [Errno {exc.errno}] {exc.strerror}\n"
        )
        sys.exit(2)
    try:
        code = compile(source, path, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except SystemExit:
        raise  # the interpreter's own handling (message, exit status), as in a fresh process
    except KeyboardInterrupt:
        raise  # the interpreter re-raises SIGINT on exit for it; keep that
    except BaseException as exc:  # noqa: BLE001 - report it exactly as the interpreter would
        traceback = exc.__traceback__
        if traceback is not None and traceback.tb_frame.f_code is _become_trial.__code__:
            traceback = traceback.tb_next  # this frame: a fresh process shows the script's only
        exc.__traceback__ = traceback  # what the default hook prints
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, traceback
        sys.excepthook(type(exc), exc, traceback)
        sys.exit(1)


def main() -> None:
    control_fd = int(sys.argv[1])
    # Our own directory must not shadow anything while we import (a fresh process has the
    # script's directory there instead; `_become_trial` puts it in).
    del sys.path[0]
    _preload()
    data = _read_launch(control_fd)
    if not data:
        sys.exit(0)  # retired before any launch
    import json

    _become_trial(json.loads(data))


if __name__ == "__main__":
    main()
