"""Pickled-object collectives between the processes of one trial, over ZMQ.

Topology: a star. The chief (rank 0) binds a PUB socket (chief -> everyone) and a PULL socket
(everyone -> chief); every other rank connects a SUB and a PUSH to them. Each node with more than
one process also has a local star rooted at its ``local_rank == 0`` process (``ipc://`` sockets in
a temp dir, or ephemeral TCP on 127.0.0.1 with ``force_tcp``), used by the ``*_local`` variants.
The sockets, message framing and startup handshake live in `_zmq_star`; reading a launcher's
environment into the rank arguments lives in `_launch_env`.

These helpers coordinate small Python objects (a checkpoint uuid, a "should I stop" flag); they are
not a replacement for framework collectives such as ``torch.distributed.all_reduce``.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import TYPE_CHECKING, Any

from determined.core import _launch_env
from determined.core._zmq_star import DistributedTimeout as DistributedTimeout  # re-exported
from determined.core._zmq_star import Star, Stars, open_stars

if TYPE_CHECKING:
    import zmq  # imported where sockets are made: a single-process trial never pays for it

logger = logging.getLogger("determined.core")

DEFAULT_PUB_PORT = 12360
# Determined derives the second port from the first; keep that so one env var moves both.
PULL_PORT_OFFSET = 16

# How long construction waits for every peer to connect. Ranks start at different times (imports
# of torch alone take seconds), so this is generous; a rank that never comes means a dead peer.
DEFAULT_STARTUP_TIMEOUT_S = 600.0


def _env_port(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not a port number") from None


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
        self._global: Star | None = None
        self._local: Star | None = None
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
        assert self._zmq is not None and self._chief_ip is not None
        stars = Stars()
        try:
            open_stars(
                stars,
                self._zmq,
                rank=self.rank,
                size=self.size,
                local_rank=self.local_rank,
                local_size=self.local_size,
                cross_rank=self.cross_rank,
                chief_ip=self._chief_ip,
                pub_port=self._pub_port,
                pull_port=self._pull_port,
                force_tcp=self._force_tcp,
                timeout=self._timeout,
                startup_timeout=startup_timeout,
            )
        finally:
            # Whatever was opened is closed by close(), also when opening failed half-way.
            self._global, self._local = stars.global_star, stars.local_star
            self._tempdir = stars.tempdir

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
        return cls(**_launch_env.torch_distributed(chief_ip))

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
        return cls(**_launch_env.deepspeed(chief_ip))

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
        return cls(**_launch_env.horovod(hvd, chief_ip))

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
        kwargs, make_strategy = _launch_env.tf_config()
        context = cls(**kwargs)
        return context, make_strategy()


class DummyDistributedContext(DistributedContext):
    """Rank 0 of 1: every collective returns at once without I/O."""

    def __init__(self) -> None:
        super().__init__(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
