"""The master's Ray driver, in a process of its own (`python -m master_lite.runners.ray._bridge
IN_FD OUT_FD ADDRESS`), started and restarted by the master's `RayConnection`.

Why a process: a Ray driver whose head goes away ends itself ("Failed to connect to GCS within
60 seconds", a fatal check that no Python code can catch), and one cannot reconnect to a new
head in the same process. So the master never imports Ray; this process does, runs the trials'
actors (`RayDriver`), and talks to the master over two pipes (pickled tuples):

* master -> here: ("launch", LaunchSpec, slots, options), ("signal", allocation_id, signum),
  ("close",);
* here -> master: ("connected", info), ("failed", why), ("nodes", [node...]) whenever the alive
  nodes change, ("log", records), ("exit", allocation_id, code, loss or None), ("lost", why).

A watchdog probes the head's GCS port every second; when it has not answered for
`HEAD_LOST_SECONDS` this process says ("lost", why) and exits (Ray would end it later anyway):
the master then ends the runs as lost with the cluster and reconnects with a fresh process.
When the master goes away (its pipe closes) this process exits, and Ray kills the actors it owns.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

HEAD_LOST_SECONDS = 10.0
NODES_EVERY_SECONDS = 2.0


def _head_answers(gcs_address: str) -> bool:
    host, _, port = gcs_address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=2):
            return True
    except (OSError, ValueError):
        return False


class _Outbox:
    def __init__(self, fd: int) -> None:
        self._connection = Connection(fd, readable=False)
        self._lock = threading.Lock()

    def send(self, message: tuple) -> None:
        try:
            with self._lock:
                self._connection.send(message)
        except (OSError, ValueError):  # the master is gone: nothing is left to do
            os._exit(0)


def _watch(cluster: Any, gcs_address: str, outbox: _Outbox) -> None:
    """Send the alive nodes when they change; say the head is lost when it stops answering."""
    last: Any = None
    last_answer = time.monotonic()
    next_nodes = 0.0
    while True:
        now = time.monotonic()
        if _head_answers(gcs_address):
            last_answer = now
            if now >= next_nodes:
                next_nodes = now + NODES_EVERY_SECONDS
                try:
                    nodes = cluster.nodes()
                except Exception:  # noqa: BLE001 - the probe decides whether the head is lost
                    nodes = None
                if nodes is not None and nodes != last:
                    last = nodes
                    outbox.send(("nodes", nodes))
        elif now - last_answer > HEAD_LOST_SECONDS:
            outbox.send(
                (
                    "lost",
                    f"the Ray head's GCS at {gcs_address} has not answered for "
                    f"{HEAD_LOST_SECONDS:.0f} s",
                )
            )
            os._exit(3)
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    inbox = Connection(int(args[0]), writable=False)
    outbox = _Outbox(int(args[1]))
    address = args[2] if len(args) > 2 and args[2] else None
    from master_lite.runners.ray._runner import RayCluster, RayDriver

    # The master reads these lines (`RayConnection._read_output`): warnings reach its log.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    try:
        cluster = RayCluster.connect(address)
    except ValueError as exc:
        outbox.send(("failed", str(exc)))
        return 2
    # Only the master ends this process ("close", or its pipe closing, or its death's SIGKILL):
    # a SIGTERM/SIGINT meant for the master (a service manager's stop of the whole group, ^C)
    # must not end the driver, and with it the trials, before they were preempted with a
    # checkpoint. (Ray's own SIGTERM handler, which `ray.init` installed, would exit.)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    gcs_address = str(cluster.ray.get_runtime_context().gcs_address)
    driver: Any = None

    def on_exit(allocation_id: str, code: int) -> None:
        outbox.send(("exit", allocation_id, code, driver.losses.pop(allocation_id, None)))

    driver = RayDriver(
        cluster,
        log_sink=lambda records: outbox.send(("log", records)),
        on_exit=on_exit,
        use_gpus=False,
    )
    outbox.send(("connected", {"address": address, "gcs_address": gcs_address}))
    threading.Thread(
        target=_watch, args=(cluster, gcs_address, outbox), name="ray-watch", daemon=True
    ).start()
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            break  # the master is gone
        kind = message[0]
        if kind == "launch":
            driver.launch(message[1], message[2], message[3])
        elif kind == "signal":
            driver.send_signal(message[1], message[2])
        elif kind == "close":
            break
    # Ending the driver ends its job: Ray kills the actors (and so the trials) it owns.
    closer = threading.Thread(target=cluster.shutdown, daemon=True)
    closer.start()
    closer.join(timeout=10)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
