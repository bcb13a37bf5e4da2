"""A TensorBoard process: started on a log directory and a loopback port, probed, signalled.

The TensorBoards part (`_tensorboards.py`) decides when; this module knows how.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

HOST = "127.0.0.1"  # TensorBoard has no authentication: loopback only, proxied by Jupyter
LAUNCHER = "master_lite.tensorboards._main"
# The board's secret path prefix reaches the launcher in its environment (readable by its own
# Unix user only), not its argv (/proc/<pid>/cmdline is readable by every local user).
PATH_PREFIX_ENV = "MASTER_LITE_TENSORBOARD_PATH_PREFIX"


def new_path_prefix() -> str:
    """A board's secret path prefix (`/<random>`): TensorBoard answers 404 to any request
    outside it, so a local user who finds its loopback port reads nothing without it."""
    return "/" + secrets.token_urlsafe(24)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def spawn_tensorboard(
    logdir: Path,
    *,
    log_path: Path,
    port: int,
    reload_seconds: int,
    title: str,
    path_prefix: str = "",
) -> subprocess.Popen:
    """Start TensorBoard (without TensorFlow, see `master_lite.tensorboards._main`) on `logdir`,
    serving on loopback `port` under `path_prefix` (`new_path_prefix`; "" for none), its
    output appended to `log_path`."""
    # The package this module is in must be importable by the child, however the master was
    # started (an editable install, PYTHONPATH, a wheel).
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env[PATH_PREFIX_ENV] = path_prefix
    command = [
        sys.executable,
        "-m",
        LAUNCHER,
        f"--logdir={logdir}",
        f"--host={HOST}",
        f"--port={port}",
        f"--reload_interval={reload_seconds}",
        # Every file of a run is polled: a trial's own files and ours share run dirs.
        "--reload_multifile=true",
        "--load_fast=false",
        f"--window_title={title}",
    ]
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own group: stopping it stops all it started
        )


def signal_group(pid: int, sig: int) -> None:
    """Send `sig` to the process group of TensorBoard `pid` (its own session: group id = pid)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def runs_tensorboard_of(pid: int, directory: Path) -> bool:
    """Whether process `pid` is still the TensorBoard of `directory` (a recorded pid may have
    been reused by an unrelated process since). Without /proc, nothing is assumed."""
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return LAUNCHER.encode() in arguments and any(
        str(directory).encode() in argument for argument in arguments
    )


async def serves(port: int, path_prefix: str = "") -> bool:
    """Whether TensorBoard answers on `port` (under `path_prefix`) yet (its HTTP server starts
    after its plugins)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 1)
    except (OSError, asyncio.TimeoutError):
        return False
    try:
        request = f"GET {path_prefix}/data/logdir HTTP/1.0\r\nHost: localhost\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5)
        return b" 200 " in status_line
    except (OSError, asyncio.TimeoutError):
        return False
    finally:
        writer.close()


__all__ = [
    "HOST",
    "PATH_PREFIX_ENV",
    "free_port",
    "new_path_prefix",
    "runs_tensorboard_of",
    "serves",
    "signal_group",
    "spawn_tensorboard",
]
