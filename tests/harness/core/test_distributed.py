"""DistributedContext: real process groups on localhost, talking over ZMQ."""

import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import Any

import pytest

from determined.core._distributed import (
    DistributedContext,
    DistributedTimeout,
    DummyDistributedContext,
)

HARNESS = str(pathlib.Path(__file__).resolve().parents[3] / "harness")

# Each rank runs this: build a context (from arguments or from a launcher's environment), run the
# listed collectives, print the results as one JSON line.
WORKER = r"""
import json, sys
from determined.core._distributed import DistributedContext
spec = json.loads(sys.argv[1])
if spec.get("from_env"):
    ctx = getattr(DistributedContext, spec["from_env"])()
else:
    ctx = DistributedContext(**spec["ctx"])
me = {"rank": ctx.rank, "size": ctx.size, "local_rank": ctx.local_rank,
      "local_size": ctx.local_size, "cross_rank": ctx.cross_rank, "cross_size": ctx.cross_size,
      "num_agents": ctx.get_num_agents()}
results = []
for op in spec["ops"]:
    if op == "exit":
        sys.exit(0)
    results.append(getattr(ctx, op)({"rank": ctx.rank, "tag": op}))
ctx.close()
print("RESULT " + json.dumps({"me": me, "results": results}), flush=True)
"""


def free_ports(n: int) -> list[int]:
    sockets = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_rank(spec: dict[str, Any], env: dict[str, str] | None = None) -> subprocess.Popen:
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = HARNESS + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        text=True,
    )


def finish(procs: list[subprocess.Popen]) -> list[dict[str, Any]]:
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"rank failed:\n{err}"
        line = [x for x in out.splitlines() if x.startswith("RESULT ")][-1]
        outputs.append(json.loads(line[len("RESULT ") :]))
    return outputs


def rank_args(rank: int, size: int, local_size: int, ports: list[int], **extra: Any) -> dict:
    return {
        "rank": rank,
        "size": size,
        "local_rank": rank % local_size,
        "local_size": local_size,
        "cross_rank": rank // local_size,
        "cross_size": size // local_size,
        "chief_ip": "127.0.0.1",
        "pub_port": ports[0],
        "pull_port": ports[1],
        "timeout": 60,
        **extra,
    }


def tagged(rank: int, tag: str) -> dict[str, Any]:
    return {"rank": rank, "tag": tag}


def test_two_ranks_allgather_gather_broadcast() -> None:
    ports = free_ports(2)
    ops = ["allgather", "gather", "broadcast", "gather", "gather", "allgather", "broadcast"]
    procs = [start_rank({"ctx": rank_args(r, 2, 2, ports), "ops": ops}) for r in (1, 0)]
    worker, chief = finish(procs)

    assert chief["me"]["rank"] == 0 and worker["me"]["rank"] == 1
    for out in (chief, worker):
        r = out["me"]["rank"]
        got = out["results"]
        assert got[0] == [tagged(0, "allgather"), tagged(1, "allgather")]
        assert got[1] == ([tagged(0, "gather"), tagged(1, "gather")] if r == 0 else None)
        assert got[2] == tagged(0, "broadcast")  # the chief's value, whatever we passed
        # Back-to-back gathers must not mix up rounds.
        assert got[3] == got[4] == ([tagged(0, "gather"), tagged(1, "gather")] if r == 0 else None)
        assert got[5] == [tagged(0, "allgather"), tagged(1, "allgather")]
        assert got[6] == tagged(0, "broadcast")


@pytest.mark.parametrize("force_tcp", [False, True])
def test_four_ranks_on_two_nodes_local_collectives(force_tcp: bool) -> None:
    # Two "nodes" of two processes each, both on localhost: global ops span 4 ranks, *_local
    # ops stay within each pair and are rooted at its local_rank 0.
    ports = free_ports(2)
    ops = ["allgather_local", "gather_local", "broadcast_local", "allgather", "gather_local"]
    procs = [
        start_rank({"ctx": rank_args(r, 4, 2, ports, force_tcp=force_tcp), "ops": ops})
        for r in (3, 1, 2, 0)
    ]
    outputs = {out["me"]["rank"]: out for out in finish(procs)}
    assert sorted(outputs) == [0, 1, 2, 3]
    for rank, out in outputs.items():
        node_root = rank - rank % 2
        node = [node_root, node_root + 1]
        got = out["results"]
        assert out["me"]["cross_rank"] == rank // 2 and out["me"]["num_agents"] == 2
        assert got[0] == [tagged(r, "allgather_local") for r in node]
        if rank == node_root:
            assert got[1] == [tagged(r, "gather_local") for r in node]
            assert got[4] == [tagged(r, "gather_local") for r in node]
        else:
            assert got[1] is None and got[4] is None
        assert got[2] == tagged(node_root, "broadcast_local")
        assert got[3] == [tagged(r, "allgather") for r in range(4)]


def test_from_torch_distributed_reads_torchrun_env() -> None:
    # What torchrun gives 2 nodes x 2 processes; the chief ip comes from DET_CHIEF_IP.
    ports = free_ports(2)
    procs = []
    for rank in range(4):
        env = {
            "RANK": str(rank),
            "WORLD_SIZE": "4",
            "LOCAL_RANK": str(rank % 2),
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": str(rank // 2),
            "GROUP_WORLD_SIZE": "2",
            "DET_CHIEF_IP": "127.0.0.1",
            "INTER_TRAIN_PROCESS_COMM_PORT_1": str(ports[0]),
            "INTER_TRAIN_PROCESS_COMM_PORT_2": str(ports[1]),
        }
        procs.append(start_rank({"from_env": "from_torch_distributed", "ops": ["allgather"]}, env))
    for rank, out in enumerate(finish(procs)):
        assert out["me"] == {
            "rank": rank,
            "size": 4,
            "local_rank": rank % 2,
            "local_size": 2,
            "cross_rank": rank // 2,
            "cross_size": 2,
            "num_agents": 2,
        }
        assert out["results"][0] == [tagged(r, "allgather") for r in range(4)]


def test_from_deepspeed_reads_its_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_SIZE": "1",
                        "CROSS_RANK": "0", "CROSS_SIZE": "1"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    ctx = DistributedContext.from_deepspeed()
    assert (ctx.rank, ctx.size, ctx.cross_size) == (0, 1, 1)
    monkeypatch.delenv("CROSS_SIZE")
    with pytest.raises(RuntimeError, match="CROSS_SIZE"):
        DistributedContext.from_deepspeed()


def test_from_torch_distributed_outside_torchrun_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        DistributedContext.from_torch_distributed()


def test_size_one_does_no_io() -> None:
    # The port is taken: a context that opened sockets would fail to bind it.
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    try:
        ctx = DistributedContext(
            rank=None, size=None, local_rank=None, local_size=None, cross_rank=None,
            cross_size=None, pub_port=port, pull_port=port,
        )  # fmt: skip
        assert (ctx.rank, ctx.size, ctx.local_rank, ctx.local_size) == (0, 1, 0, 1)
        assert (ctx.cross_rank, ctx.cross_size) == (0, 1)
        obj = {"a": 1}
        assert ctx.allgather(obj) == [obj]
        assert ctx.gather(obj) == [obj]
        assert ctx.broadcast(obj) is obj
        assert ctx.allgather_local(obj) == [obj]
        assert ctx.gather_local(obj) == [obj]
        assert ctx.broadcast_local(obj) is obj
        ctx.close()
        ctx.close()  # idempotent
        with pytest.raises(RuntimeError, match="after close"):
            ctx.allgather(obj)
    finally:
        blocker.close()


def test_dummy_is_rank_zero_of_one() -> None:
    ctx = DummyDistributedContext()
    assert (ctx.get_rank(), ctx.get_size(), ctx.get_local_rank(), ctx.get_num_agents()) == (
        0, 1, 0, 1,
    )  # fmt: skip
    assert ctx.allgather(5) == [5] and ctx.broadcast(7) == 7


def test_mixing_none_and_values_is_rejected() -> None:
    with pytest.raises(ValueError, match="local_size, cross_rank"):
        DistributedContext(
            rank=0, size=1, local_rank=0, local_size=None, cross_rank=None, cross_size=1
        )


def test_positional_arguments_are_rejected() -> None:
    with pytest.raises(TypeError):
        DistributedContext(0, 1, 0, 1, 0, 1)  # type: ignore[misc]


def test_rank_outside_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="rank=2"):
        DistributedContext(rank=2, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1)


def test_multi_node_needs_chief_ip() -> None:
    with pytest.raises(AssertionError, match="chief_ip is required"):
        DistributedContext(rank=0, size=4, local_rank=0, local_size=2, cross_rank=0, cross_size=2)


def test_construction_gives_up_when_peers_never_come() -> None:
    ports = free_ports(2)
    with pytest.raises(DistributedTimeout, match=r"members \[1\] did not connect"):
        DistributedContext(**rank_args(0, 2, 2, ports, timeout=1.0))


def test_collective_times_out_when_a_peer_died() -> None:
    ports = free_ports(2)
    worker = start_rank({"ctx": rank_args(1, 2, 2, ports), "ops": ["exit"]})
    chief = start_rank({"ctx": rank_args(0, 2, 2, ports, timeout=3.0), "ops": ["allgather"]})
    chief_out, chief_err = chief.communicate(timeout=60)
    worker.communicate(timeout=60)
    assert chief.returncode != 0
    assert "DistributedTimeout" in chief_err and "peer process probably died" in chief_err


def test_mismatched_collectives_fail_loudly() -> None:
    ports = free_ports(2)
    chief = start_rank({"ctx": rank_args(0, 2, 2, ports), "ops": ["broadcast"]})
    worker = start_rank({"ctx": rank_args(1, 2, 2, ports), "ops": ["allgather"]})
    worker_out, worker_err = worker.communicate(timeout=60)
    chief.communicate(timeout=60)
    assert worker.returncode != 0
    assert "called allgather" in worker_err and "called broadcast" in worker_err
