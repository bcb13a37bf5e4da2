"""What runs inside a Ray actor: one container of a trial run (one slot, one rank).

Its imports are the standard library and three modules that import only the standard library
(`_lines`, `_exits`, and `determined.common.context`, whose `unpack` is the one safe extraction
of a context): all four are shipped to the Ray workers by value
(`cloudpickle.register_pickle_by_value`), so a Ray node needs Python and the trial's own
dependencies, not master_lite.

The actor unpacks the context it receives through the object store into a fresh directory,
starts the entrypoint in a process group of its own, and buffers its output lines until the
master's poll collects them.

No orphans: the entrypoint runs under a small supervisor (`_SUPERVISOR`, the group's leader)
whose stdin is a pipe only the actor's process holds open. When that process dies for any
reason (the actor killed, its worker or node lost, the whole cluster stopped) the pipe reads
end-of-file and the supervisor's guard SIGKILLs the whole process group: the entrypoint and
whatever it started (a launcher's workers); so it does when the supervisor is killed alone (Ray
kills an exiting worker's children). A parent-death signal alone would reach only the direct
child.
And a worker outliving its raylet (a Ray worker notices late) kills the group itself
(`_watch_raylet`).

The trial's environment is the node's, not the master's (`node_environment`): the Ray worker's
own variables (the node's LD_LIBRARY_PATH, proxies, interface settings, and what a Ray
runtime_env set: env_vars, the PYTHONPATH of working_dir/py_modules), without any `DET_*` of the
node, then the run's own variables (`DET_*` and the config's environment_variables). `python3`
in the entrypoint is the worker's interpreter (`sys.executable`: a runtime_env's py_executable,
else the one the node runs Ray with), whose directory heads PATH.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from determined.common.context import unpack as _unpack_context
from master_lite.runners._exits import exit_code_of
from master_lite.runners._lines import read_lines

_PR_SET_PDEATHSIG = 1
# What `poll` raises for a run its node's raylet died under (the driver's `_faults` reads it as
# the node's loss).
RAYLET_LOST = "the node has died: this worker's raylet has died"


class NodeLost(RuntimeError):
    """The actor's node died under it (its raylet is gone)."""


_WATCH_SECONDS = 1.0

# Run as `python -c _SUPERVISOR RAYLET_PID ARGV...` with the lifeline pipe as stdin, in the
# trial's new session. Signals sent to the group reach the entrypoint directly, so the
# supervisor ignores them and ends as its entrypoint did (the same code, or the same signal).
# The watching is done by a guard it forks first, a member of the trial's group that is not the
# Ray worker's child: a Ray worker that exits SIGKILLs its own children
# (RAY_kill_child_processes_on_worker_exit), the supervisor among them but not its group, so a
# watchdog inside the supervisor would die with it and leave the entrypoint running. The guard
# SIGKILLs the whole group when the lifeline reads end-of-file (the worker died), when the
# node's raylet is gone (a Ray worker whose raylet died may hang a long time before it exits),
# or when the supervisor is gone (killed alone, or the entrypoint ended: its leftovers go too).
_SUPERVISOR = """
import os, signal, subprocess, sys, threading, time

def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True

def read_lifeline(done):
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    done.set()

def guard(supervisor, raylet):
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)  # the actor's readers wait for end-of-file on the output pipes
    os.dup2(devnull, 2)
    lifeline = threading.Event()
    threading.Thread(target=read_lifeline, args=(lifeline,), daemon=True).start()
    watch_raylet = raylet > 1 and os.path.isdir("/proc")
    while not lifeline.wait(1.0):
        if os.getppid() != supervisor or (watch_raylet and gone(raylet)):
            break
    os.killpg(0, signal.SIGKILL)

for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(sig, lambda *_: None)
supervisor = os.getpid()
if os.fork() == 0:
    try:
        guard(supervisor, int(sys.argv[1]))
    finally:
        os._exit(0)
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL)
code = child.wait()
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def _die_with_parent() -> None:
    """preexec_fn: the supervisor gets SIGHUP (which it ignores) when the actor's thread that
    started it ends; its lifeline pipe, not this, ends the trial (a thread of the actor may end
    while the actor lives). Kept so that a supervisor stuck before it reads its pipe goes too."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGHUP), 0, 0, 0)
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
        self._lifeline: int | None = None  # the pipe's write end: open while the actor lives
        self._raylet_lost = False
        self._raylet = 0  # the raylet's pid (this worker's parent when the run started)

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

    def start(
        self,
        argv: list[str],
        env: dict[str, str],
        context: bytes | None,
        python_at: int | None = None,
    ) -> int:
        """Run `argv` in the unpacked `context` with `node_environment(env)`; `argv[python_at]`
        (the entrypoint's `python3`) becomes this worker's interpreter."""
        argv = list(argv)
        if python_at is not None and 0 <= python_at < len(argv):
            argv[python_at] = sys.executable
        env = node_environment(env)
        self.work_dir = tempfile.mkdtemp(prefix=f"det-{self.allocation_id}-")
        if context:
            # Symbolic links stay as the context had them; a member or link that would leave
            # the work dir is refused (ContextError), as on the master.
            _unpack_context(context, self.work_dir, limit_bytes=1 << 40)
        self._raylet = os.getppid()  # a Ray worker is its raylet's child
        lifeline_read, self._lifeline = os.pipe()  # not inherited by anything else
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _SUPERVISOR, str(self._raylet), *argv],
                cwd=self.work_dir,
                env=env,
                stdin=lifeline_read,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            os.close(lifeline_read)
        self._readers = [
            threading.Thread(target=self._read, args=(stream, name), daemon=True)
            for stream, name in ((self.process.stdout, "stdout"), (self.process.stderr, "stderr"))
        ]
        for reader in self._readers:
            reader.start()
        threading.Thread(target=self._wait, daemon=True).start()
        threading.Thread(target=self._watch_raylet, args=(self._raylet,), daemon=True).start()
        return self.process.pid

    def _watch_raylet(self, raylet: int) -> None:
        """The watchdog for a node that dies under a live actor: a Ray worker is its raylet's
        child, so a changed parent means the raylet died (the node was lost, or `ray stop`);
        the worker may take a while to notice, the trial's group goes at once."""
        while self._exit_code is None:
            if os.getppid() != raylet:
                self._raylet_lost = True  # the run ends as lost with its node, not failed
                self.signal(signal.SIGKILL)
                return
            time.sleep(_WATCH_SECONDS)

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
            if os.getppid() != self._raylet:
                # The raylet died under it: whichever watchdog killed the group first (this
                # worker's or the supervisor's), the run ended with its node, not by itself.
                self._raylet_lost = True
            self._exit_code = exit_code_of(code)
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
            code = self._exit_code
            if code is not None and self._raylet_lost:
                if lines:
                    return lines, None  # the last lines first; the next poll says why it ended
                raise NodeLost(RAYLET_LOST)
            return lines, code

    def signal(self, signum: int) -> bool:
        if self.process is None or self._exit_code is not None:
            return False
        try:
            os.killpg(self.process.pid, signum)
            return True
        except (ProcessLookupError, PermissionError):
            return False


# The Ray cluster's token (token authentication) is the node's, not the trial's: kept out of a
# trial's environment (and so out of its logs). A trial that uses Ray itself finds it where
# the node keeps it (RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token).
NODE_SECRETS = ("RAY_AUTH_TOKEN",)


def node_environment(own: dict[str, str]) -> dict[str, str]:
    """The environment of a trial on this node: this Ray worker's own variables without the
    `DET_*` ones (those are the master's to give) and `NODE_SECRETS`, `python3`'s directory
    first on PATH, then `own` (the run's: `DET_*`, the config's environment_variables, the
    placement's)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("DET_") and name not in NODE_SECRETS
    }
    python_dir = os.path.dirname(sys.executable)
    env["PATH"] = python_dir + os.pathsep + env.get("PATH", "")
    env.update(own)
    return env


def container_environment(
    base: dict[str, str], *, rank: int, placements: list[dict], use_gpus: bool
) -> dict[str, str]:
    """The run's own variables for container `rank` (the node's environment goes under them on
    the node, `node_environment`), with where Ray put each container."""
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
