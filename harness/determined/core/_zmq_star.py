"""The ZMQ transport under `DistributedContext`: one star of processes per scope.

The chief (rank 0) binds a PUB socket (chief -> everyone) and a PULL socket (everyone -> chief);
every other rank connects a SUB and a PUSH to them. Each node with more than one process also has a
local star rooted at its ``local_rank == 0`` process (``ipc://`` sockets in a temp dir, or
ephemeral TCP on 127.0.0.1 with ``force_tcp``). `DistributedContext` owns the rank bookkeeping and
the public collectives; this module owns sockets, message framing and the startup handshake.
"""

from __future__ import annotations

import dataclasses
import pickle
import tempfile
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import zmq  # imported where sockets are made: a single-process trial never pays for it

# Between startup "sync" messages the root waits this long for acknowledgements.
_SYNC_INTERVAL_S = 0.05


class DistributedTimeout(RuntimeError):
    """A peer did not answer within the timeout (it probably died)."""


class Star:
    """One root and N-1 members: gather to the root, broadcast from the root.

    Every message carries the collective's name and a sequence number, so ranks that call
    different collectives (or a different number of them) fail loudly instead of silently
    exchanging the wrong objects.
    """

    def __init__(
        self,
        *,
        zmq_context: zmq.Context,
        index: int,
        size: int,
        timeout: float | None,
        what: str,
    ) -> None:
        self.zmq_context = zmq_context
        self.index = index
        self.size = size
        self.what = what  # "global" or "local", for error messages
        self.timeout = timeout
        self.seq = 0
        self.is_root = index == 0
        self.sockets: list[zmq.Socket] = []
        self.pub_endpoint = ""
        self.pull_endpoint = ""

    def _socket(self, kind: int, linger_ms: int) -> zmq.Socket:
        import zmq

        sock = self.zmq_context.socket(kind)
        # A pending message must reach peers even when close() follows right after it.
        sock.setsockopt(zmq.LINGER, linger_ms)
        self.sockets.append(sock)
        return sock

    def bind(self, pub_endpoint: str, pull_endpoint: str) -> None:
        """Root only. Endpoints may end in ``:*`` (ephemeral port); see the endpoint attributes."""
        import zmq

        assert self.is_root
        self.pub = self._socket(zmq.PUB, 2000)
        self.pull = self._socket(zmq.PULL, 0)
        try:
            self.pub.bind(pub_endpoint)
            self.pull.bind(pull_endpoint)
        except zmq.ZMQError as e:
            raise RuntimeError(
                f"DistributedContext: could not bind {pub_endpoint} / {pull_endpoint} ({e}); "
                "another process probably uses the port. Choose other ports with the "
                "INTER_TRAIN_PROCESS_COMM_PORT_1/_2 environment variables or the "
                "pub_port/pull_port arguments."
            ) from e
        self.pub_endpoint = self.pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.pull_endpoint = self.pull.getsockopt_string(zmq.LAST_ENDPOINT)

    def connect(self, pub_endpoint: str, pull_endpoint: str) -> None:
        """Members only. Connecting before the root binds is fine: ZMQ retries."""
        import zmq

        assert not self.is_root
        self.sub = self._socket(zmq.SUB, 0)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.push = self._socket(zmq.PUSH, 2000)
        self.sub.connect(pub_endpoint)
        self.push.connect(pull_endpoint)
        self.pub_endpoint = pub_endpoint
        self.pull_endpoint = pull_endpoint

    # -- plumbing ----------------------------------------------------------------------------

    def _recv(self, sock: zmq.Socket, timeout: float | None, waiting_for: str) -> Any:
        if timeout is not None:
            if not sock.poll(int(timeout * 1000)):
                raise DistributedTimeout(
                    f"DistributedContext ({self.what} rank {self.index} of {self.size}): no "
                    f"message within {timeout:g} s while waiting for {waiting_for}. A peer process "
                    "probably died or stopped calling the same collectives in the same order."
                )
        return pickle.loads(sock.recv())

    def _send(self, sock: zmq.Socket, message: tuple) -> None:
        sock.send(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def startup_sync(self, timeout: float) -> None:
        # PUB/SUB drops everything published before a subscription arrives ("slow joiner"). The
        # root keeps publishing "sync" until every member has acknowledged one; a member that has
        # received one is subscribed, so it will also receive everything after it.
        deadline = time.monotonic() + timeout
        if self.is_root:
            ready: set[int] = set()
            while len(ready) < self.size - 1:
                if time.monotonic() > deadline:
                    missing = sorted(set(range(1, self.size)) - ready)
                    raise DistributedTimeout(
                        f"DistributedContext: {self.what} members {missing} did not connect to "
                        f"{self.pub_endpoint} / {self.pull_endpoint} within {timeout:g} s. Every "
                        "rank must construct a DistributedContext (construction is collective), "
                        "with the same chief_ip and ports."
                    )
                self._send(self.pub, ("sync", 0, None))
                if self.pull.poll(int(_SYNC_INTERVAL_S * 1000)):
                    while self.pull.poll(0):
                        kind, _, member = pickle.loads(self.pull.recv())
                        if kind == "ready":
                            ready.add(member)
            self._send(self.pub, ("go", 0, None))
        else:
            acknowledged = False
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise DistributedTimeout(
                        f"DistributedContext: {self.what} rank {self.index} could not reach its "
                        f"root at {self.pub_endpoint} within {timeout:g} s. Check that the chief "
                        "is running, that chief_ip is right, and that the ports are reachable."
                    )
                if not self.sub.poll(int(min(remaining, 1.0) * 1000)):
                    continue
                kind, _, _ = pickle.loads(self.sub.recv())
                if kind == "go":
                    if acknowledged:
                        return
                    # A "go" for others before our first sync cannot happen: the root waits for us.
                    continue
                if not acknowledged:
                    self._send(self.push, ("ready", 0, self.index))
                    acknowledged = True

    def _check(self, got: tuple[str, int], expected: tuple[str, int], sender: str) -> None:
        if got != expected:
            raise RuntimeError(
                f"DistributedContext ({self.what}): rank {self.index} called {expected[0]} "
                f"(collective #{expected[1]}) but {sender} called {got[0]} (collective "
                f"#{got[1]}). Every rank must call the same collectives in the same order."
            )

    # -- collectives -------------------------------------------------------------------------

    def gather(self, obj: Any, name: str = "gather") -> list[Any] | None:
        self.seq += 1
        if self.is_root:
            values: list[Any] = [None] * self.size
            values[0] = obj
            for _ in range(self.size - 1):
                kind, seq, member, value = self._recv(
                    self.pull, self.timeout, f"the other ranks to join {name}"
                )
                self._check((kind, seq), (name, self.seq), f"rank {member}")
                values[member] = value
            return values
        self._send(self.push, (name, self.seq, self.index, obj))
        return None

    def broadcast(self, obj: Any, name: str = "broadcast") -> Any:
        if name == "broadcast":
            self.seq += 1
        if self.is_root:
            self._send(self.pub, (name, self.seq, obj))
            return obj
        kind, seq, value = self._recv(self.sub, self.timeout, f"the root's {name}")
        self._check((kind, seq), (name, self.seq), "the root")
        return value

    def gather_with_release(self, obj: Any) -> list[Any] | None:
        # Members wait until the root has everything, so a fast member cannot start its next
        # collective while the root is still collecting this one.
        values = self.gather(obj, "gather")
        self.broadcast(None, "gather")
        return values

    def allgather(self, obj: Any) -> list[Any]:
        values = self.gather(obj, "allgather")
        result: list[Any] = self.broadcast(values, "allgather")
        return result

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets = []


@dataclasses.dataclass
class Stars:
    """What `open_stars` has opened so far, kept even when a later step fails (to close it)."""

    global_star: Star | None = None
    local_star: Star | None = None
    tempdir: str | None = None  # holds the local ``ipc://`` sockets; removed on close


def open_stars(
    stars: Stars,
    zmq_context: zmq.Context,
    *,
    rank: int,
    size: int,
    local_rank: int,
    local_size: int,
    cross_rank: int,
    chief_ip: str,
    pub_port: int,
    pull_port: int,
    force_tcp: bool,
    timeout: float | None,
    startup_timeout: float,
) -> None:
    """Open the global star and, with several processes on this node, the local one.

    Each star (and the local temp dir) is recorded in ``stars`` as soon as it exists, so that the
    caller can close what was opened when a later step fails.
    """
    global_star = stars.global_star = Star(
        zmq_context=zmq_context, index=rank, size=size, timeout=timeout, what="global"
    )
    if rank == 0:
        # Single node: listen on loopback only; multi-node: peers come from other hosts.
        host = "127.0.0.1" if chief_ip == "127.0.0.1" else "*"
        global_star.bind(f"tcp://{host}:{pub_port}", f"tcp://{host}:{pull_port}")
    else:
        global_star.connect(f"tcp://{chief_ip}:{pub_port}", f"tcp://{chief_ip}:{pull_port}")
    global_star.startup_sync(startup_timeout)
    if local_size < 2:
        return

    # The node's local_rank 0 opens the local star; everyone learns its address through a
    # global allgather, which is why construction is a collective.
    local_star = stars.local_star = Star(
        zmq_context=zmq_context, index=local_rank, size=local_size, timeout=timeout, what="local"
    )
    if local_rank == 0:
        if force_tcp:
            local_star.bind("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
        else:
            tempdir = stars.tempdir = tempfile.mkdtemp(prefix="det-dist-")
            local_star.bind(f"ipc://{tempdir}/pub", f"ipc://{tempdir}/pull")
    mine = None
    if local_rank == 0:
        mine = (local_star.pub_endpoint, local_star.pull_endpoint)
    everyone = global_star.allgather((cross_rank, local_rank, mine))
    roots = [eps for cross, local, eps in everyone if cross == cross_rank and local == 0]
    if len(roots) != 1:
        raise RuntimeError(
            f"DistributedContext: expected exactly one process with local_rank=0 on node "
            f"cross_rank={cross_rank}, found {len(roots)}; check every process's rank arguments"
        )
    if local_rank != 0:
        local_star.connect(*roots[0])
    local_star.startup_sync(startup_timeout)
