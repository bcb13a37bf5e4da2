"""What runs inside a Ray actor: one container of a trial run (one slot, one rank).

Kept free of project imports (standard library only) because it is shipped to the Ray workers
by value (`cloudpickle.register_pickle_by_value`): a Ray node needs Python and the trial's own
dependencies, not master_lite.

The actor unpacks the context it receives through the object store into a fresh directory,
starts the entrypoint in a process group of its own (which dies with the actor: PDEATHSIG), and
buffers its output lines until the master's poll collects them.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

MAX_LINE_BYTES = 8 * 1024
_LINE_END = re.compile(rb"\r\n|\r|\n")


def read_lines(stream: Any, emit: Callable[[list[bytes]], None]) -> None:
    """Read a pipe until EOF and `emit` its lines as they complete.

    "\n", "\r" (progress bars) and "\r\n" end a line; a line longer than MAX_LINE_BYTES is
    emitted in pieces so one runaway line cannot grow memory. Closes the stream at the end.
    (The local runner reads its trials' pipes with this too.)
    """
    fd = stream.fileno()
    pending = b""
    after_cr = False
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if after_cr and chunk.startswith(b"\n"):
                chunk = chunk[1:]  # the "\n" of a "\r\n" split across two reads
            after_cr = chunk.endswith(b"\r")
            pending += chunk
            parts = _LINE_END.split(pending)
            pending = parts.pop()
            if len(pending) > MAX_LINE_BYTES:
                parts.append(pending)
                pending = b""
            if parts:
                emit(parts)
        if pending:
            emit([pending])
    finally:
        stream.close()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """preexec_fn: the trial gets SIGKILL when the actor process dies (node or worker lost)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _gpu_uuids(indices: list[int]) -> list[str]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library or no driver: fake or absent GPUs have no uuid
        return []
    try:
        uuids = []
        for index in indices:
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
            uuids.append(uuid.decode() if isinstance(uuid, bytes) else str(uuid))
        return uuids
    except Exception:  # uuids only inform (DET_GPU_UUIDS): the container runs without them
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # nothing is left to release if shutting NVML down fails
            pass


def _safe_extract(data: bytes, dest: str) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            target = os.path.realpath(os.path.join(dest, member.name))
            if not target.startswith(os.path.realpath(dest) + os.sep) and target != dest:
                raise ValueError(f"context member {member.name!r} points outside the work dir")
            if not (member.isfile() or member.isdir()):
                continue
            # The "data" filter (3.12+) refuses the same things; naming it avoids the warning.
            extra: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extract(member, dest, **extra)


class TrialContainer:
    """The Ray actor class (wrapped with `ray.remote` by the master side)."""

    def __init__(self, allocation_id: str) -> None:
        self.allocation_id = allocation_id
        self.process: subprocess.Popen | None = None
        self.work_dir: str | None = None
        self._lines: list[tuple[str, float, bytes]] = []
        self._cond = threading.Condition()
        self._readers: list[threading.Thread] = []
        self._exit_code: int | None = None

    def where(self) -> dict:
        """Where Ray placed us: node, address, GPUs, spare ports (the chief's become the
        rendezvous ports), and the worker pid."""
        import ray

        gpu_ids = [int(g) for g in ray.get_gpu_ids()]
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "gpu_ids": gpu_ids,
            "gpu_uuids": _gpu_uuids(gpu_ids),
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
            "ports": _free_ports(3),
        }

    def start(self, argv: list[str], env: dict[str, str], context: bytes | None) -> int:
        self.work_dir = tempfile.mkdtemp(prefix=f"det-{self.allocation_id}-")
        if context:
            _safe_extract(context, self.work_dir)
        self.process = subprocess.Popen(
            argv,
            cwd=self.work_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self._readers = [
            threading.Thread(target=self._read, args=(stream, name), daemon=True)
            for stream, name in ((self.process.stdout, "stdout"), (self.process.stderr, "stderr"))
        ]
        for reader in self._readers:
            reader.start()
        threading.Thread(target=self._wait, daemon=True).start()
        return self.process.pid

    def _read(self, stream: Any, name: str) -> None:
        read_lines(stream, lambda parts: self._add(name, parts))

    def _add(self, name: str, parts: list[bytes]) -> None:
        if not parts:
            return
        now = time.time()
        with self._cond:
            self._lines.extend((name, now, part) for part in parts)
            self._cond.notify_all()

    def _wait(self) -> None:
        assert self.process is not None
        code = self.process.wait()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # leftovers would hold the pipes open
        except (ProcessLookupError, PermissionError):
            pass
        for reader in self._readers:
            reader.join(timeout=10)
        with self._cond:
            self._exit_code = code if code >= 0 else 128 - code
            self._cond.notify_all()
        if self.work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def poll(self, timeout: float) -> tuple[list[tuple[str, float, bytes]], int | None]:
        """Lines captured since the last poll, and the exit code once the run is over and every
        line has been collected (waits up to `timeout` seconds for either)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._lines and self._exit_code is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            lines, self._lines = self._lines, []
            return lines, (self._exit_code if not self._lines else None)

    def signal(self, signum: int) -> bool:
        if self.process is None or self._exit_code is not None:
            return False
        try:
            os.killpg(self.process.pid, signum)
            return True
        except (ProcessLookupError, PermissionError):
            return False


def container_environment(
    base: dict[str, str], *, rank: int, placements: list[dict], use_gpus: bool
) -> dict[str, str]:
    """The trial env of container `rank`: the master's env plus where Ray put each container."""
    me = placements[rank]
    chief = placements[0]
    env = dict(base)
    env.update(
        {
            "DET_AGENT_ID": me["node_id"],
            "DET_CONTAINER_RANK": str(rank),
            "DET_CONTAINER_ADDRS": json.dumps([p["ip"] for p in placements]),
            "DET_CONTAINER_SLOT_COUNTS": json.dumps([1] * len(placements)),
            "DET_SLOT_IDS": json.dumps(me["gpu_ids"] if use_gpus else [0]),
            "DET_GPU_UUIDS": json.dumps(me["gpu_uuids"] if use_gpus else []),
            "CUDA_VISIBLE_DEVICES": me["cuda_visible_devices"] if use_gpus else "",
            "DET_CHIEF_IP": chief["ip"],
        }
    )
    # Rendezvous on the chief's node: ports that were free there a moment ago.
    for name, port in zip(
        ("C10D_PORT", "INTER_TRAIN_PROCESS_COMM_PORT_1", "INTER_TRAIN_PROCESS_COMM_PORT_2"),
        chief["ports"],
        strict=False,
    ):
        env[name] = str(port)
    return env
