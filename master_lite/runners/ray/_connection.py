"""The master's link to its Ray cluster: a driver process (`_bridge`) it starts, watches, and
starts again with backoff when the cluster goes away (docs/distributed.md, "Faults").

Never blocks the caller: the master listens at once, whether Ray is up or not. `status()` says
where it stands ("connecting", "connected", or "waiting": "waiting for the Ray cluster at …"),
for GET /master, GET /resources and the master's log.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from multiprocessing.connection import Connection
from typing import Any, Protocol

RAY_ADDRESS_ENV = "MASTER_LITE_RAY_ADDRESS"
logger = logging.getLogger("master_lite")
_DRIVER_WARNING = "WARNING master_lite: "
FIRST_RETRY_SECONDS = 1.0
_FATAL_WORDS = ("Check failed", "Failed to", "failed to", "Error:", "died", "FATAL")
MAX_RETRY_SECONDS = 30.0


class Listener(Protocol):
    def message(self, message: tuple) -> None: ...

    def cluster_lost(self, why: str) -> None: ...


def _die_with_master() -> None:
    """preexec_fn: the driver process gets SIGKILL when the master's thread that started it
    ends (the master died); Ray then kills the driver's actors."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)


def _head_silent(address: str | None) -> str | None:
    """Why nothing can be connected at `address` when it is a host:port that does not accept
    connections; None when it does, or is "auto", "ray://..." or None (the driver finds out)."""
    if not address or "://" in address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return None
    except ValueError:
        return None
    except OSError as exc:
        return f"nothing answers at {address} ({exc.strerror or exc})"


class RayConnection:
    """One master's connection to a Ray cluster, through a driver process of its own."""

    def __init__(
        self,
        address: str | None = None,
        *,
        inventory: Any,
    ) -> None:
        """`inventory`: turns node lists into the scheduler's pools (`scheduler.RayInventory`:
        `update(nodes) -> pools`, `default`, `descriptions`, `slot_type`, `label`). ValueError
        when Ray is not installed (the master stops at once rather than wait for nothing)."""
        if importlib.util.find_spec("ray") is None:
            raise ValueError(
                "resource_manager 'ray' needs Ray: pip install 'jupyter-determined[ray]' "
                "(or pip install ray), or use resource_manager 'local'"
            )
        self.address = (
            address or os.environ.get(RAY_ADDRESS_ENV) or os.environ.get("RAY_ADDRESS") or None
        )
        self.inventory = inventory
        self.pools: list[Any] = self.inventory.update([])
        self.nodes: list[dict] = []
        self.listener: Listener | None = None
        # Called (on this connection's thread) with the pools whenever the cluster's shape
        # changes: the master hands them to its scheduler.
        self.on_shape: Callable[[list[Any]], None] | None = None
        self.state = "connecting"
        self.message = f"waiting for the Ray cluster at {self._where}: connecting"
        self.since = time.time()
        self._outbox: Connection | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._process: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._output: deque[str] = deque(maxlen=20)

    @property
    def _where(self) -> str:
        return self.address or "(a new local Ray instance)"

    def start(self) -> None:
        """Connect in the background, and keep connecting whenever the cluster is lost."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._keep_connected, name="ray", daemon=True)
            self._thread.start()

    def status(self) -> dict:
        """Where the connection stands, for the API: state, message, since, nodes."""
        return {
            "resource_manager": "ray",
            "state": self.state,
            "message": self.message,
            "since": datetime.fromtimestamp(self.since, timezone.utc).isoformat(),
            "address": self.address,
            "nodes": [
                {
                    "node_id": n.get("node_id"),
                    "address": n.get("address"),
                    "alive": bool(n.get("alive")),
                    "pool": n.get("pool"),
                    "gpus": int(float((n.get("resources") or {}).get("GPU", 0))),
                    "cpus": int(float((n.get("resources") or {}).get("CPU", 0))),
                }
                for n in self.nodes
            ],
        }

    def send(self, message: tuple) -> bool:
        """Hand `message` to the driver; False when there is none (the cluster is not
        connected)."""
        with self._lock:
            if self._outbox is None:
                return False
            try:
                self._outbox.send(message)
                return True
            except (OSError, ValueError):
                return False

    def close(self, timeout: float = 10.0) -> None:
        """End the driver (Ray then ends its actors) and stop reconnecting."""
        self._closing.set()
        self.send(("close",))
        process = self._process
        if process is not None:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    # -- the connection's thread ----------------------------------------------------------------
    def _set(self, state: str, message: str) -> None:
        if (state, message) != (self.state, self.message):
            self.state, self.message, self.since = state, message, time.time()
            (logger.info if state == "connected" else logger.warning)("%s", message)

    def _keep_connected(self) -> None:
        delay = FIRST_RETRY_SECONDS
        while not self._closing.is_set():
            connected, why = self._drive_once()
            if self._closing.is_set():
                break
            self._shape([])
            if connected:
                delay = FIRST_RETRY_SECONDS
                if self.listener is not None:
                    self.listener.cluster_lost(why)
            self._set(
                "waiting",
                f"waiting for the Ray cluster at {self._where}: {why}; "
                f"trying again in {delay:.0f} s",
            )
            self._closing.wait(delay)
            delay = min(delay * 2, MAX_RETRY_SECONDS)

    def _drive_once(self) -> tuple[bool, str]:
        """Run one driver process until it ends: (whether it connected, why it ended)."""
        silent = _head_silent(self.address)
        if silent:  # no driver process for a head that is not there (ray.init would wait)
            return False, silent
        to_driver_r, to_driver_w = os.pipe()
        from_driver_r, from_driver_w = os.pipe()
        env = dict(os.environ)
        # The driver imports master_lite as this process does, wherever that came from.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "master_lite.runners.ray._bridge",
                    str(to_driver_r),
                    str(from_driver_w),
                    self.address or "",
                ],
                pass_fds=(to_driver_r, from_driver_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_master,
            )
        finally:
            os.close(to_driver_r)
            os.close(from_driver_w)
        self._process = process
        threading.Thread(target=self._read_output, args=(process,), daemon=True).start()
        inbox = Connection(from_driver_r, writable=False)
        outbox = Connection(to_driver_w, readable=False)
        connected, why = False, ""
        try:
            while True:
                try:
                    message = inbox.recv()
                except (EOFError, OSError):
                    break
                kind = message[0]
                if kind == "connected":
                    connected = True
                    with self._lock:
                        self._outbox = outbox
                    self._set("connected", f"connected to the Ray cluster at {self._where}")
                elif kind in ("failed", "lost"):
                    why = str(message[1])
                elif kind == "nodes":
                    self._shape(message[1])
                elif self.listener is not None:
                    self.listener.message(message)
        finally:
            with self._lock:
                self._outbox = None
            inbox.close()
            outbox.close()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # a driver that lost its head
            process.wait()
        if not why:
            # Ray's own words for why it ended its driver (a fatal check, "Failed to ..."), if
            # its last lines have them.
            last = next(
                (line for line in reversed(self._output) if any(w in line for w in _FATAL_WORDS)),
                "",
            )
            why = f"the Ray driver process ended (exit code {process.returncode})" + (
                f": {last.strip()[:300]}" if last else ""
            )
        return connected, why

    def _shape(self, nodes: list[dict]) -> None:
        pools = self.inventory.update(nodes)
        self.nodes = [dict(n, pool=self.inventory.pool_of(n)) for n in nodes]
        if [(p.name, p.slot_ids, p.slot_type) for p in pools] == [
            (p.name, p.slot_ids, p.slot_type) for p in self.pools
        ]:
            return
        self.pools = pools
        if self.on_shape is not None:
            try:
                self.on_shape(pools)
            except Exception:  # noqa: BLE001 - the master may be closing
                logger.exception("while applying the Ray cluster's new shape")

    def _read_output(self, process: subprocess.Popen) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip()
            self._output.append(line)
            # The driver's own warnings (`_bridge` logs "WARNING ..."), e.g. node-local
            # checkpoint storage, reach the master's log; Ray's chatter only its debug log.
            if line.startswith(_DRIVER_WARNING):
                logger.warning("ray driver: %s", line[len(_DRIVER_WARNING) :])
            else:
                logger.debug("ray driver: %s", line)


__all__ = ["RAY_ADDRESS_ENV", "RayConnection"]
