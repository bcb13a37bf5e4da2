"""Pickled-object collectives between the processes of one trial, over ZMQ.

Topology: a star. The chief (rank 0) binds a PUB socket (chief -> everyone) and a PULL socket
(everyone -> chief); every other rank connects a SUB and a PUSH to them. Each node with more than
one process also has a local star rooted at its ``local_rank == 0`` process (``ipc://`` sockets in
a temp dir, or ephemeral TCP on 127.0.0.1 with ``force_tcp``), used by the ``*_local`` variants.

These helpers coordinate small Python objects (a checkpoint uuid, a "should I stop" flag); they are
not a replacement for framework collectives such as ``torch.distributed.all_reduce``.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import tempfile
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import zmq  # imported where sockets are made: a single-process trial never pays for it

logger = logging.getLogger("determined.core")

DEFAULT_PUB_PORT = 12360
# Determined derives the second port from the first; keep that so one env var moves both.
PULL_PORT_OFFSET = 16

# How long construction waits for every peer to connect. Ranks start at different times (imports
# of torch alone take seconds), so this is generous; a rank that never comes means a dead peer.
DEFAULT_STARTUP_TIMEOUT_S = 600.0

# Between startup "sync" messages the root waits this long for acknowledgements.
_SYNC_INTERVAL_S = 0.05


class DistributedTimeout(RuntimeError):
    """A peer did not answer within the timeout (it probably died)."""


def _env_port(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not a port number") from None


class _Star:
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


class DistributedContext:
    """Rank information and pickled-object collectives for the processes of one trial.

    Constructing one is a collective when ``size >= 2``: every rank must construct it. With
    ``size < 2`` nothing is opened and every collective returns immediately.
    """

    def __init__(
        self,
        *,
        rank: int | None,
        size: int | None,
        local_rank: int | None,
        local_size: int | None,
        cross_rank: int | None,
        cross_size: int | None,
        chief_ip: str | None = None,
        pub_port: int | None = None,
        pull_port: int | None = None,
        port_offset: int = 0,
        force_tcp: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Connect this process to the other processes of the trial.

        Args:
            rank, size, local_rank, local_size, cross_rank, cross_size: this process's place in
                the job (``cross_*`` = node index / node count). Pass all six, or all six as None
                for a single process.
            chief_ip: address of the rank-0 node; required for multi-node jobs, ignored on one
                node (127.0.0.1 is used).
            pub_port, pull_port: the chief's ports (default: env INTER_TRAIN_PROCESS_COMM_PORT_1
                or 12360, and env INTER_TRAIN_PROCESS_COMM_PORT_2 or pub_port + 16).
            port_offset: accepted for compatibility; unused.
            force_tcp: use TCP on 127.0.0.1 instead of unix sockets for the per-node star.
            timeout: seconds a collective waits for its peers before raising
                ``DistributedTimeout`` (None: wait forever, as Determined does, except that
                construction gives up after 600 s).

        Raises:
            ValueError: only some of the six rank arguments were given, or one is out of range.
            AssertionError: a multi-node job without ``chief_ip``.
            RuntimeError: the chief could not bind its ports.
            DistributedTimeout: the peers did not all connect within the startup timeout.
        """
        given = [rank, size, local_rank, local_size, cross_rank, cross_size]
        if all(v is None for v in given):
            rank, size, local_rank, local_size, cross_rank, cross_size = 0, 1, 0, 1, 0, 1
        elif any(v is None for v in given):
            names = ["rank", "size", "local_rank", "local_size", "cross_rank", "cross_size"]
            missing = [n for n, v in zip(names, given, strict=False) if v is None]
            raise ValueError(
                "DistributedContext: pass all of rank, size, local_rank, local_size, cross_rank "
                f"and cross_size, or none of them; missing: {', '.join(missing)}"
            )
        assert rank is not None and size is not None and local_rank is not None
        assert local_size is not None and cross_rank is not None and cross_size is not None
        self.rank = int(rank)
        self.size = int(size)
        self.local_rank = int(local_rank)
        self.local_size = int(local_size)
        self.cross_rank = int(cross_rank)
        self.cross_size = int(cross_size)
        for name, index, count in (
            ("rank", self.rank, self.size),
            ("local_rank", self.local_rank, self.local_size),
            ("cross_rank", self.cross_rank, self.cross_size),
        ):
            if not 0 <= index < count:
                raise ValueError(
                    f"DistributedContext: {name}={index} is outside 0..{count - 1} "
                    f"(the matching size is {count})"
                )
        if self.local_size > self.size:
            raise ValueError(
                f"DistributedContext: local_size={self.local_size} is larger than size={self.size}"
            )

        if self.local_size == self.size:
            # Everything runs on this node; the loopback address always works.
            chief_ip = "127.0.0.1"
        else:
            assert chief_ip is not None, (
                "DistributedContext: chief_ip is required for a multi-node job "
                f"(local_size={self.local_size} != size={self.size}); pass the address of the "
                "rank-0 node, e.g. chief_ip=det.get_cluster_info().container_addrs[0]"
            )
        self._chief_ip = chief_ip
        self._pub_port = (
            pub_port
            if pub_port is not None
            else _env_port("INTER_TRAIN_PROCESS_COMM_PORT_1", DEFAULT_PUB_PORT)
        )
        self._pull_port = (
            pull_port
            if pull_port is not None
            else _env_port("INTER_TRAIN_PROCESS_COMM_PORT_2", self._pub_port + PULL_PORT_OFFSET)
        )
        self._port_offset = port_offset
        self._force_tcp = force_tcp
        self._timeout = timeout
        startup_timeout = timeout if timeout is not None else DEFAULT_STARTUP_TIMEOUT_S

        self._zmq: zmq.Context | None = None
        self._global: _Star | None = None
        self._local: _Star | None = None
        self._tempdir: str | None = None
        self._closed = False
        if self.size < 2:
            return

        import zmq

        self._zmq = zmq.Context()
        try:
            self._connect(startup_timeout)
        except BaseException:
            self.close()
            raise

    def _connect(self, startup_timeout: float) -> None:
        assert self._zmq is not None
        self._global = _Star(
            zmq_context=self._zmq,
            index=self.rank,
            size=self.size,
            timeout=self._timeout,
            what="global",
        )
        if self.rank == 0:
            # Single node: listen on loopback only; multi-node: peers come from other hosts.
            host = "127.0.0.1" if self._chief_ip == "127.0.0.1" else "*"
            self._global.bind(f"tcp://{host}:{self._pub_port}", f"tcp://{host}:{self._pull_port}")
        else:
            self._global.connect(
                f"tcp://{self._chief_ip}:{self._pub_port}",
                f"tcp://{self._chief_ip}:{self._pull_port}",
            )
        self._global.startup_sync(startup_timeout)
        if self.local_size < 2:
            return

        # The node's local_rank 0 opens the local star; everyone learns its address through a
        # global allgather, which is why construction is a collective.
        self._local = _Star(
            zmq_context=self._zmq,
            index=self.local_rank,
            size=self.local_size,
            timeout=self._timeout,
            what="local",
        )
        if self.local_rank == 0:
            if self._force_tcp:
                self._local.bind("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
            else:
                self._tempdir = tempfile.mkdtemp(prefix="det-dist-")
                self._local.bind(f"ipc://{self._tempdir}/pub", f"ipc://{self._tempdir}/pull")
        mine = None
        if self.local_rank == 0:
            mine = (self._local.pub_endpoint, self._local.pull_endpoint)
        everyone = self._global.allgather((self.cross_rank, self.local_rank, mine))
        roots = [eps for cross, local, eps in everyone if cross == self.cross_rank and local == 0]
        if len(roots) != 1:
            raise RuntimeError(
                f"DistributedContext: expected exactly one process with local_rank=0 on node "
                f"cross_rank={self.cross_rank}, found {len(roots)}; check every process's "
                "rank arguments"
            )
        if self.local_rank != 0:
            self._local.connect(*roots[0])
        self._local.startup_sync(startup_timeout)

    # -- getters (Determined's API has both attributes and getters) ---------------------------

    def get_rank(self) -> int:
        """This process's rank among all processes of the trial (0 is the chief)."""
        return self.rank

    def get_local_rank(self) -> int:
        """This process's rank among the trial's processes on this node."""
        return self.local_rank

    def get_size(self) -> int:
        """How many processes the trial has in all."""
        return self.size

    def get_local_size(self) -> int:
        """How many of the trial's processes run on this node."""
        return self.local_size

    def get_cross_rank(self) -> int:
        """This node's index among the trial's nodes."""
        return self.cross_rank

    def get_cross_size(self) -> int:
        """How many nodes the trial runs on."""
        return self.cross_size

    def get_num_agents(self) -> int:
        """How many nodes (agents) the trial runs on; the same as `get_cross_size()`."""
        return self.cross_size

    # -- collectives -------------------------------------------------------------------------

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError("DistributedContext: used after close()")

    def allgather(self, stuff: Any) -> list[Any]:
        """Every rank gets every rank's ``stuff``; every rank must call it.

        Args:
            stuff: any picklable object.

        Returns:
            The objects of all ranks, ordered by rank.

        Raises:
            DistributedTimeout: a peer did not join within the context's `timeout`.
            RuntimeError: the context is closed, or ranks called different collectives.
        """
        self._require_open()
        if self.size < 2:
            return [stuff]
        assert self._global is not None
        return self._global.allgather(stuff)

    def gather(self, stuff: Any) -> list[Any] | None:
        """The chief gets every rank's ``stuff``; every rank must call it.

        Args:
            stuff: any picklable object.

        Returns:
            On the chief, the objects of all ranks ordered by rank; None on the other ranks.

        Raises:
            DistributedTimeout: a peer did not join within the context's `timeout`.
            RuntimeError: the context is closed, or ranks called different collectives.
        """
        self._require_open()
        if self.size < 2:
            return [stuff]
        assert self._global is not None
        return self._global.gather_with_release(stuff)

    def broadcast(self, stuff: Any) -> Any:
        """Every rank gets the chief's ``stuff``; every rank must call it.

        Args:
            stuff: on the chief, any picklable object; ignored on the other ranks.

        Returns:
            The chief's object.

        Raises:
            DistributedTimeout: a peer did not join within the context's `timeout`.
            RuntimeError: the context is closed, or ranks called different collectives.
        """
        self._require_open()
        if self.size < 2:
            return stuff
        assert self._global is not None
        return self._global.broadcast(stuff)

    def allgather_local(self, stuff: Any) -> list[Any]:
        """Like `allgather`, among the processes of this node only.

        Args:
            stuff: any picklable object.

        Returns:
            The objects of this node's processes, ordered by local rank.

        Raises:
            DistributedTimeout: a peer did not join within the context's `timeout`.
            RuntimeError: the context is closed, or ranks called different collectives.
        """
        self._require_open()
        if self.local_size < 2:
            return [stuff]
        assert self._local is not None
        return self._local.allgather(stuff)

    def gather_local(self, stuff: Any) -> list[Any] | None:
        """Like `gather`, among the processes of this node only, to local rank 0.

        Args:
            stuff: any picklable object.

        Returns:
            On local rank 0, the objects of this node's processes ordered by local rank; None
            on the others.

        Raises:
            DistributedTimeout: a peer did not join within the context's `timeout`.
            RuntimeError: the context is closed, or ranks called different collectives.
        """
        self._require_open()
        if self.local_size < 2:
            return [stuff]
        assert self._local is not None
        return self._local.gather_with_release(stuff)

    def broadcast_local(self, stuff: Any = None) -> Any:
        """Like `broadcast`, among the processes of this node only, from local rank 0.

        Args:
            stuff: on local rank 0, any picklable object; ignored on the others.

        Returns:
            Local rank 0's object.

        Raises:
            DistributedTimeout: a peer did not join within the context's `timeout`.
            RuntimeError: the context is closed, or ranks called different collectives.
        """
        self._require_open()
        if self.local_size < 2:
            return stuff
        assert self._local is not None
        return self._local.broadcast(stuff)

    def close(self) -> None:
        """Close the sockets and the temp dir; collectives fail afterwards. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for star in (self._local, self._global):
            if star is not None:
                star.close()
        if self._zmq is not None:
            self._zmq.term()
            self._zmq = None
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    def __enter__(self) -> DistributedContext:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(rank={self.rank}, size={self.size}, "
            f"local_rank={self.local_rank}, local_size={self.local_size}, "
            f"cross_rank={self.cross_rank}, cross_size={self.cross_size})"
        )

    # -- constructors from launcher environments ---------------------------------------------

    @classmethod
    def from_torch_distributed(cls, chief_ip: str | None = None) -> DistributedContext:
        """Build from the environment torchrun gives each worker.

        Args:
            chief_ip: the address of the rank-0 node; by default $DET_CHIEF_IP (only needed
                when the trial spans several nodes).

        Returns:
            A `DistributedContext` (constructing it is a collective: every rank must do it).

        Raises:
            RuntimeError: a needed environment variable is not set.
            ValueError: one of them is not an integer.
        """
        env = _require_env(
            [
                "RANK",
                "WORLD_SIZE",
                "LOCAL_RANK",
                "LOCAL_WORLD_SIZE",
                "GROUP_RANK",
                "GROUP_WORLD_SIZE",
            ],
            "from_torch_distributed() must run in a process started by torchrun, e.g. through "
            "python3 -m determined.launch.torch_distributed",
        )
        return cls(
            rank=env["RANK"],
            size=env["WORLD_SIZE"],
            local_rank=env["LOCAL_RANK"],
            local_size=env["LOCAL_WORLD_SIZE"],
            cross_rank=env["GROUP_RANK"],
            cross_size=env["GROUP_WORLD_SIZE"],
            chief_ip=chief_ip or os.environ.get("DET_CHIEF_IP"),
        )

    @classmethod
    def from_deepspeed(cls, chief_ip: str | None = None) -> DistributedContext:
        """Build from the environment the DeepSpeed launcher gives each worker.

        Args:
            chief_ip: the address of the rank-0 node; by default $DET_CHIEF_IP (only needed
                when the trial spans several nodes).

        Returns:
            A `DistributedContext` (constructing it is a collective: every rank must do it).

        Raises:
            RuntimeError: a needed environment variable is not set.
            ValueError: one of them is not an integer.
        """
        env = _require_env(
            ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"],
            "from_deepspeed() must run in a process started by the deepspeed launcher",
        )
        return cls(
            rank=env["RANK"],
            size=env["WORLD_SIZE"],
            local_rank=env["LOCAL_RANK"],
            local_size=env["LOCAL_SIZE"],
            cross_rank=env["CROSS_RANK"],
            cross_size=env["CROSS_SIZE"],
            chief_ip=chief_ip or os.environ.get("DET_CHIEF_IP"),
        )

    @classmethod
    def from_horovod(cls, hvd: Any, chief_ip: str | None = None) -> DistributedContext:
        """Build from an initialized ``horovod.<framework>`` module.

        Args:
            hvd: the initialized module, e.g. ``horovod.torch`` after ``hvd.init()``.
            chief_ip: the address of the rank-0 node; by default $DET_CHIEF_IP (only needed
                when the trial spans several nodes).

        Returns:
            A `DistributedContext` (constructing it is a collective: every rank must do it).

        Raises:
            ValueError: ``hvd`` has no ``cross_rank()``/``cross_size()`` and
                $HOROVOD_CROSS_RANK/$HOROVOD_CROSS_SIZE are not set.
        """

        def cross(method: str, env_name: str) -> int:
            if hasattr(hvd, method):
                return int(getattr(hvd, method)())
            if env_name in os.environ:
                return int(os.environ[env_name])
            raise ValueError(f"from_horovod(): hvd.{method}() is missing and {env_name} is not set")

        return cls(
            rank=hvd.rank(),
            size=hvd.size(),
            local_rank=hvd.local_rank(),
            local_size=hvd.local_size(),
            cross_rank=cross("cross_rank", "HOROVOD_CROSS_RANK"),
            cross_size=cross("cross_size", "HOROVOD_CROSS_SIZE"),
            chief_ip=chief_ip or os.environ.get("DET_CHIEF_IP"),
        )

    @classmethod
    def from_tf_config(cls) -> tuple[DistributedContext, Any]:
        """Build from ``TF_CONFIG`` (as set for ``MultiWorkerMirroredStrategy``).

        Returns:
            ``(context, strategy)``: ``MultiWorkerMirroredStrategy`` when ``TF_CONFIG`` lists
            several workers, ``MirroredStrategy`` with several local GPUs, else TensorFlow's
            default strategy. With several workers the context's rank is the worker's
            ``task.index``; its local layout comes from the launcher's ``LOCAL_RANK`` /
            ``LOCAL_WORLD_SIZE`` / ``GROUP_RANK`` / ``GROUP_WORLD_SIZE`` when
            ``determined.launch.tensorflow`` set them, else one worker per node (Determined's).

        Raises:
            ValueError: ``TF_CONFIG`` is not valid JSON.
            RuntimeError: ``TF_CONFIG``'s task is not a ``worker``.
        """
        import json

        import tensorflow as tf  # only the caller who asks for it pays for the import

        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        workers = tf_config.get("cluster", {}).get("worker", [])
        if len(workers) > 1:
            task_type = tf_config.get("task", {}).get("type")
            if task_type != "worker":
                raise RuntimeError(
                    "DistributedContext.from_tf_config() only supports the default strategy, "
                    "MirroredStrategy or MultiWorkerMirroredStrategy, but found unexpected "
                    f'task_type="{task_type}" in TF_CONFIG ({os.environ["TF_CONFIG"]})'
                )
            index = int(tf_config["task"]["index"])
            chief_ip = os.environ.get("DET_CHIEF_IP") or workers[0].rsplit(":", 1)[0]
            local_rank, local_size, cross_rank, cross_size = _tf_local_layout(index, len(workers))
            context = cls(
                rank=index,
                size=len(workers),
                local_rank=local_rank,
                local_size=local_size,
                cross_rank=cross_rank,
                cross_size=cross_size,
                chief_ip=chief_ip,
            )
            return context, tf.distribute.MultiWorkerMirroredStrategy()
        context = cls(
            rank=None,
            size=None,
            local_rank=None,
            local_size=None,
            cross_rank=None,
            cross_size=None,
        )
        if len(tf.config.list_physical_devices("GPU")) > 1:
            return context, tf.distribute.MirroredStrategy()
        return context, tf.distribute.get_strategy()


def _tf_local_layout(index: int, size: int) -> tuple[int, int, int, int]:
    """(local_rank, local_size, cross_rank, cross_size) of TF_CONFIG worker `index`.

    Determined runs one TensorFlow worker per node, so each is local rank 0 of 1 and its node
    index is its rank. `determined.launch.tensorflow` here may run several workers on one node;
    it then also sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and
    GROUP_WORLD_SIZE, which are used when they agree with TF_CONFIG.
    """
    names = [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
    ]
    try:
        rank, world, local_rank, local_size, cross_rank, cross_size = (
            int(os.environ[name]) for name in names
        )
    except (KeyError, ValueError):
        return 0, 1, index, size
    if (rank, world) != (index, size) or not 0 <= local_rank < local_size <= size:
        return 0, 1, index, size
    if not 0 <= cross_rank < cross_size:
        return 0, 1, index, size
    return local_rank, local_size, cross_rank, cross_size


def _require_env(names: list[str], hint: str) -> dict:
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise RuntimeError(f"environment variables {', '.join(missing)} are not set: {hint}")
    values = {}
    for name in names:
        try:
            values[name] = int(os.environ[name])
        except ValueError:
            raise ValueError(
                f"environment variable {name}={os.environ[name]!r} is not an integer"
            ) from None
    return values


class DummyDistributedContext(DistributedContext):
    """Rank 0 of 1: every collective returns at once without I/O."""

    def __init__(self) -> None:
        super().__init__(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
