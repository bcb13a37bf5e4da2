"""Run a TensorFlow training script with a ``TF_CONFIG`` for ``MultiWorkerMirroredStrategy``.

Usage: ``python3 -m determined.launch.tensorflow [--port PORT] [--] SCRIPT...``

* One worker in the whole trial (one slot, or none): the script runs as is, with
  ``DET_CHIEF_IP`` set and no ``TF_CONFIG`` (as in Determined).
* Several: one worker per slot, each under ``wrap_rank`` (so its lines carry ``[rank=N]``), with

  - ``TF_CONFIG = {"cluster": {"worker": ["<addr>:<port>", ...]}, "task": {"type": "worker",
    "index": <rank>}}`` listing every worker of the trial, node by node;
  - its place in the job as ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
    ``GROUP_RANK``, ... (see ``_common.rank_environment``), which
    ``DistributedContext.from_tf_config()`` reads for the local layout;
  - ``CUDA_VISIBLE_DEVICES`` narrowed to its own GPU when the trial was given one per worker.

  Ports: ``--port P`` gives a node's workers P, P+1, ...; without it a single-node trial picks
  free ports and a multi-node trial uses ``$C10D_PORT`` (default 29400), +1 per local worker.
  The first worker to fail stops the others (SIGTERM, then SIGKILL after a grace period) and the
  launcher exits with its code.

Determined itself runs one process per *container* (several GPUs of one node go to one process
with ``MirroredStrategy``); here every slot is a worker, so that several slots of one machine
train as one ``MultiWorkerMirroredStrategy`` job (docs/compatibility-launch.md).
"""

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

from determined.launch import _common, _lifetime

logger = logging.getLogger("determined.launch.tensorflow")

DEFAULT_PORT = 29400
LAUNCHER = "determined.launch.tensorflow"
# How long the other workers get to exit after SIGTERM once one has failed.
STOP_GRACE_S = 10.0
_POLL_S = 0.1


def parse_args(args: list[str]) -> tuple[int | None, list[str]]:
    """``[--port PORT] [--] SCRIPT...`` -> (port or None, script), as Determined reads it."""
    parser = argparse.ArgumentParser(
        prog=f"python3 -m {LAUNCHER}",
        usage="%(prog)s [--port PORT] [--] SCRIPT...",
        description="Launch a script for TensorFlow training on a Determined cluster.",
        epilog=(
            "With several slots this launcher starts one worker per slot, each with a TF_CONFIG "
            "environment variable for MultiWorkerMirroredStrategy."
        ),
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="the first port TensorFlow workers use to talk to each other",
    )
    parser.add_argument("script", metavar="SCRIPT...", nargs=argparse.REMAINDER)
    # Everything after the first "--" is the script, whatever it looks like.
    if "--" in args:
        split = args.index("--")
        args, extra = args[:split], args[split + 1 :]
    else:
        extra = []
    parsed = parser.parse_args(args)
    script = list(parsed.script) + extra
    if not script:
        parser.print_usage(sys.stderr)
        raise _common.LaunchError("empty script is not allowed")
    return parsed.port, script


def _free_ports(n: int) -> list[int]:
    # Hold every socket until all are bound, so the n ports are distinct.
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def worker_addresses(
    layout: _common.NodeLayout, port: int | None, env: dict[str, str]
) -> list[str]:
    """Every worker of the trial as ``host:port``, node by node (TF_CONFIG's cluster.worker)."""
    if layout.num_nodes == 1:
        n = layout.total_procs
        ports = [port + i for i in range(n)] if port is not None else _free_ports(n)
        return [f"{layout.container_addrs[0]}:{p}" for p in ports]
    base = port if port is not None else int(env.get("C10D_PORT") or DEFAULT_PORT)
    return [
        f"{addr}:{base + i}"
        for c, addr in enumerate(layout.container_addrs)
        for i in range(layout.procs_on(c))
    ]


def tf_config(workers: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})


def worker_environments(
    layout: _common.NodeLayout, workers: list[str], env: dict[str, str]
) -> list[dict[str, str]]:
    """The environment of each of this container's workers."""
    local_size = layout.procs_per_node
    devices = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    result = []
    for local_rank in range(local_size):
        rank = layout.first_rank + local_rank
        worker_env = dict(env)
        worker_env["TF_CONFIG"] = tf_config(workers, rank)
        worker_env.update(
            _common.rank_environment(
                rank=rank,
                size=len(workers),
                local_rank=local_rank,
                local_size=local_size,
                cross_rank=layout.container_rank,
                cross_size=layout.num_nodes,
            )
        )
        if len(devices) == local_size and local_size > 1:
            worker_env["CUDA_VISIBLE_DEVICES"] = devices[local_rank]
        result.append(worker_env)
    return result


def _preexec_worker() -> None:
    # If the launcher is SIGKILLed its workers still hear about it.
    _lifetime.signal_me_when_parent_dies(signal.SIGTERM)


def supervise(procs: list[subprocess.Popen], grace: float = STOP_GRACE_S) -> int:
    """Wait for every worker; the first to fail stops the rest and its status is the result."""
    while True:
        alive = False
        for proc in procs:
            code = proc.poll()
            if code is None:
                alive = True
            elif code != 0:
                stop_all(procs, grace)
                return _common.exit_status(code)
        if not alive:
            return 0
        time.sleep(_POLL_S)


def stop_all(procs: list[subprocess.Popen], grace: float) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _ForwardToAll:
    def __init__(self, procs: list[subprocess.Popen]) -> None:
        self.procs = procs

    def __call__(self, signum: int, _frame: object = None) -> None:
        for proc in self.procs:
            try:
                proc.send_signal(signum)
            except ProcessLookupError:
                pass


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s: [%(process)s] %(name)s: %(message)s"
    )
    try:
        port, script = parse_args(sys.argv[1:] if argv is None else argv)
        layout = _common.NodeLayout.from_env(LAUNCHER)
    except _common.LaunchError as e:
        print(f"{LAUNCHER}: {e}", file=sys.stderr)
        return 1

    env = dict(os.environ)
    env["DET_CHIEF_IP"] = layout.chief_ip
    # NCCL collectives across nodes on the interface that routes to the chief (unless set).
    env.update(_common.rendezvous_interface_environment(layout, env))
    if layout.total_procs == 1:
        # One worker: the default strategy (or MirroredStrategy over its GPUs), no TF_CONFIG.
        return _common.run_one(script, env, LAUNCHER)

    workers = worker_addresses(layout, port, env)
    procs: list[subprocess.Popen] = []
    forward = _ForwardToAll(procs)
    for signum in _common.FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    try:
        for worker_env in worker_environments(layout, workers, env):
            rank = worker_env["RANK"]
            cmd = [sys.executable, "-m", "determined.launch.wrap_rank", rank, "--", *script]
            logger.info("worker %s of %d: %s", rank, len(workers), " ".join(script))
            procs.append(subprocess.Popen(cmd, env=worker_env, preexec_fn=_preexec_worker))
    except OSError as e:
        print(f"{LAUNCHER}: cannot start a worker: {e}", file=sys.stderr)
        stop_all(procs, STOP_GRACE_S)
        return 1
    return supervise(procs)


if __name__ == "__main__":
    sys.exit(main())
