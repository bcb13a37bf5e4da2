"""What lets the suite run in parallel (pytest-xdist, `make test`), a pytest plugin that
tests/conftest.py loads.

Each test process (an xdist worker, or the one process of a serial run) gets:

* **its own home**: HOME points at a fresh directory and the XDG / Jupyter / IPython directory
  variables are cleared, so nothing a test runs (the `det` CLI's auth store, the master's
  default root dir `<jupyter data dir>/determined`, kernel connection files, Keras' settings)
  reads or writes the user's real home, or a directory another worker uses at the same time.
* **rendezvous ports one at a time**: every master hands out its trials' rendezvous ports
  (`C10D_PORT`, the ZMQ ports) from the same fixed range, skipping only ports already bound, so
  two masters starting multi-slot trials at once may hand out the same port before either
  trial binds it. Tests marked `rendezvous_ports` take a host-wide file lock for their run:
  they never overlap, across workers or separate pytest runs on the machine.

Everything else a test uses is already private: servers listen on ports the kernel picks, root
dirs live under tmp_path, test images and containers carry the worker's pid.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

import pytest

# Cleared so that they follow the private HOME (where set, they would point at shared places).
_HOME_VARIABLES = (
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_DATA_DIR",
    "JUPYTER_RUNTIME_DIR",
    "IPYTHONDIR",
    "KERAS_HOME",
)

RENDEZVOUS_LOCK = pathlib.Path(tempfile.gettempdir()) / "jupyter-determined-tests-rendezvous.lock"

_saved: dict[str, str | None] = {}
_home: pathlib.Path | None = None


def worker_id() -> str:
    """The xdist worker's id ("gw0", ...), or "main" in a serial run."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def pytest_configure(config: pytest.Config) -> None:
    # At configure time, before test modules are imported: some read HOME on import.
    global _home
    if _home is not None:
        return
    _home = pathlib.Path(tempfile.mkdtemp(prefix=f"jd-tests-home-{worker_id()}-"))
    for name in ("HOME", *_HOME_VARIABLES):
        _saved[name] = os.environ.get(name)
    os.environ["HOME"] = str(_home)
    for name in _HOME_VARIABLES:
        os.environ.pop(name, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _home
    if _home is None:
        return
    for name, value in _saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(_home, ignore_errors=True)
    _home = None


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Every test leaves os.environ as it found it. One process runs many test files (xdist
    hands each worker a share), and an in-process Jupyter server's extension exports variables
    for its kernels (DET_MASTER, DET_MASTER_TOKEN, DET_NOTEBOOK_TRIALS_IN_KERNELS) into it: the
    trials of a later test in that process would inherit them."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _rendezvous_ports_lock(request: pytest.FixtureRequest) -> Iterator[None]:
    """For tests marked `rendezvous_ports`: hold the host-wide lock for the test's run."""
    if request.node.get_closest_marker("rendezvous_ports") is None:
        yield
        return
    with open(RENDEZVOUS_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
