"""What every server a test starts shares: a child process in its own session, with a log file."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests._support.waiting import wait_until

REPO = pathlib.Path(__file__).resolve().parents[2]


def child_env(
    extra: Mapping[str, str] | None = None,
    drop_prefixes: Sequence[str] = ("DET_", "MASTER_LITE_", "RAY_ADDRESS"),
) -> dict[str, str]:
    """The environment for a child process of a test.

    The repository and `harness/` are importable, this interpreter's directory comes first on
    PATH (entrypoints say `python3 x.py`), and no `DET_*` / `MASTER_LITE_*` / `RAY_ADDRESS`
    setting of the caller leaks in.

    Args:
        extra: variables set on top.
        drop_prefixes: prefixes of the caller's variables left out.
    """
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(tuple(drop_prefixes))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "harness"), str(REPO)])
    env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra or {})
    return env


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port of `host` (loopback by default) that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback TCP ports that were free a moment ago: all are bound at once,
    since ports picked one after another may repeat (and two rendezvous endpoints on one port
    hang every rank)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class ServerProcess:
    """A server child process in its own session (so a test can kill it alone), logging to a file.

    Subclasses say how to start it (`command`, `environment`) and when it is ready (`ready`).
    """

    #: what the server is called in failure messages
    name = "server"
    #: the server's working directory (None: the test's)
    cwd: pathlib.Path | None = None

    def __init__(
        self, log_path: pathlib.Path, preexec_fn: Callable[[], None] | None = None
    ) -> None:
        self.log_path = pathlib.Path(log_path)
        self.preexec_fn = preexec_fn
        self.process: subprocess.Popen[bytes] | None = None

    # -- to override -------------------------------------------------------------------------
    def command(self) -> list[str]:
        """The argv that starts the server."""
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        """The server's environment; `child_env()` by default."""
        return child_env()

    def ready(self) -> bool:
        """Whether the started server serves (polled by `launch`)."""
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------------------------
    def launch(self, timeout: float = 90, interval: float = 0.1) -> None:
        """Start the process and wait until `ready()`.

        Args:
            timeout: seconds to wait for readiness.
            interval: seconds between readiness checks.

        Raises:
            RuntimeError: the process exited first, or was not ready in time (it is killed).
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=self.preexec_fn,
            )
        process = self.process

        def up() -> bool:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {process.returncode}:\n{self.log_text()[-5000:]}"
                )
            return self.ready()

        try:
            wait_until(up, timeout, f"{self.name} to start", interval)
        except AssertionError:
            self.kill()
            raise RuntimeError(
                f"{self.name} did not start within {timeout} s:\n{self.log_text()[-5000:]}"
            ) from None

    @property
    def pid(self) -> int:
        """The server's process id."""
        assert self.process is not None, f"{self.name} was never started"
        return self.process.pid

    def alive(self) -> bool:
        """Whether the server process is running."""
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (a clean stop) and wait; SIGKILL if it outlives `timeout`. Returns the status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            self.closed()

    def kill(self) -> None:
        """SIGKILL the server process alone (its own children are left, as after a crash)."""
        if self.alive():
            assert self.process is not None
            self.process.kill()
            self.process.wait(30)
        self.closed()

    def kill_group(self) -> None:
        """SIGKILL the server's whole process group (it and whatever it started) and reap it."""
        if self.alive():
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            assert self.process is not None
            self.process.wait(30)
        self.closed()

    def closed(self) -> None:
        """Called after the process stopped or was killed: release clients."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.alive():
            self.stop()
