"""The `slow` marker, applied the same way everywhere (a pytest plugin; tests/conftest.py loads it).

A test is slow when it starts a real master, trial processes, containers, kernels, a Jupyter
server or a browser: `make test-fast` (`-m "not slow"`) leaves those out. Two rules keep the
marker honest without a list to maintain by hand:

* **by fixture**: a test that uses one of `SLOW_FIXTURES` (they start such programs) is marked
  slow at collection, so it cannot forget the mark;
* **the guard**: a test *not* marked slow that starts one of those programs itself (through
  `subprocess`, seen with an audit hook) fails, naming the program, so the mark cannot be
  forgotten where the program is started some other way. Mark the test (or its module:
  `pytestmark = pytest.mark.slow`) and it passes.

Tests that take long for other reasons (training in-process) are marked in their files.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

# Fixtures that start real servers, containers or a browser (tests/_support/fixtures.py and
# tests/browser/conftest.py).
SLOW_FIXTURES = frozenset(
    {
        "start_master",
        "start_jupyter",
        "lab_server",
        "container_images",
        "lab",
        "browser",
        "page",
        "s3_server",
        "gcs_server",
    }
)

# `python -m <module>` that starts a server or a kernel.
_SLOW_MODULES = {
    "jupyterlab": "a JupyterLab",
    "jupyter_server": "a Jupyter server",
    "kernel_gateway": "a Jupyter Kernel Gateway",
    "ipykernel_launcher": "a Jupyter kernel",
    "ipykernel": "a Jupyter kernel",
    "master_lite._tensorboard_main": "a TensorBoard",
    "tensorboard": "a TensorBoard",
}
# Executables (by name) that are one of those programs.
_SLOW_EXECUTABLES = {
    "master-lite": "a real master",
    "jupyter-lab": "a JupyterLab",
    "jupyter-server": "a Jupyter server",
    "jupyter-kernelgateway": "a Jupyter Kernel Gateway",
    "tensorboard": "a TensorBoard",
    "chromium": "Chromium",
    "chromium-browser": "Chromium",
    "chrome": "Chromium",
}
_CONTAINER_RUNTIMES = ("podman", "docker")
# Subcommands of a container runtime that make or run containers or images (`ps`, `inspect`
# and friends only ask).
_CONTAINER_WORK = frozenset({"run", "create", "start", "exec", "import", "build", "pull", "load"})
# What a master puts in the environment of every trial it starts (a test that fakes a trial's
# environment for a launcher or a runner sets fewer).
_TRIAL_VARIABLES = frozenset({"DET_CLUSTER_ID", "DET_SESSION_TOKEN", "DET_EXPERIMENT_CONFIG"})
# Where a real container runtime lives; a test's stand-in script lives in its tmp_path.
_SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/opt/")


def slow_program(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str | None:
    """What starting `argv` (with environment `env`) starts that makes a test slow, or None.

    Args:
        argv: the command line.
        env: the child's environment; None inherits the caller's (never a trial's).
    """
    if not argv:
        return None
    args = [str(arg) for arg in argv]
    name = os.path.basename(args[0])
    if env is not None and _TRIAL_VARIABLES.issubset(env):
        return "a master's trial process"
    if "-m" in args[:-1]:
        module = args[args.index("-m") + 1]
        if module == "master_lite":
            return None if _only_asks(args) else "a real master"
        if module in _SLOW_MODULES:
            return _SLOW_MODULES[module]
    if name in _SLOW_EXECUTABLES:
        if name == "master-lite" and _only_asks(args):
            return None
        return _SLOW_EXECUTABLES[name]
    if name in _CONTAINER_RUNTIMES and (
        not os.path.isabs(args[0]) or args[0].startswith(_SYSTEM_PREFIXES)
    ):
        verbs = [arg for arg in args[1:] if not arg.startswith("-")]
        if verbs and verbs[0] in _CONTAINER_WORK:
            return f"{name} {verbs[0]} (a container or image)"
    return None


def _only_asks(args: Sequence[str]) -> bool:
    """Whether a master's command line only asks for its help or version (starts no master)."""
    return any(arg in ("--help", "-h", "--version") for arg in args)


class _Watch:
    """What the test running now started (filled by the audit hook, from any thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = False
        self.seen: list[str] = []

    def record(self, argv: Sequence[str], env: Mapping[str, str] | None) -> None:
        what = slow_program(argv, env)
        if what is not None:
            with self.lock:
                if self.active:
                    shown = " ".join(str(arg) for arg in argv)
                    self.seen.append(f"{what}: {shown[:160]}")

    def start(self) -> None:
        with self.lock:
            self.active, self.seen = True, []

    def stop(self) -> list[str]:
        with self.lock:
            self.active = False
            return list(self.seen)


_WATCH = _Watch()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Called for every audited event of the process: return at once for all but Popen.
    if event != "subprocess.Popen":
        return
    _executable, argv, _cwd, env = args
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [os.fsdecode(argv)]
    _WATCH.record([os.fsdecode(arg) for arg in argv], env)


_installed = False


def _install() -> None:
    # Audit hooks cannot be removed: install one per process, however often the plugin loads.
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True


def pytest_configure(config: pytest.Config) -> None:
    _install()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark slow every test that uses a slow fixture (before `-m` deselects)."""
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _guarded(item: pytest.Item, phase: str) -> Iterator[None]:
    if item.get_closest_marker("slow") is not None:
        yield
        return
    _WATCH.start()
    try:
        yield
    finally:
        seen = _WATCH.stop()
    if seen:
        started = "\n  ".join(dict.fromkeys(seen))
        pytest.fail(
            f"this test is not marked slow but its {phase} started:\n  {started}\n"
            "mark it slow (`@pytest.mark.slow`, or `pytestmark = pytest.mark.slow` for its "
            "module): see tests/_support/slow.py",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item, "call"))
