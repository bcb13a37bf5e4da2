"""Sharded checkpoints and collective preemption with two real ranks (DistributedContext over ZMQ)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from determined.core._checkpoint import merge_metadata
from tests._support import free_ports

ROOT = pathlib.Path(__file__).resolve().parents[3]

RANK = r"""
import json, pathlib, sys
import determined as det
from determined.core import DistributedContext
rank, pub, pull, store, scenario = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
dist = DistributedContext(rank=rank, size=2, local_rank=rank, local_size=2, cross_rank=0, cross_size=1,
                          pub_port=pub, pull_port=pull, timeout=60)
mine = pathlib.Path(store).parent / f"rank{rank}"
mine.mkdir(exist_ok=True)
(mine / f"shard{rank}.bin").write_text(f"shard of rank {rank}")
(mine / "common.txt").write_text("same" if scenario == "same" else f"differs {rank}")
out = {}
with det.core.init(distributed=dist, checkpoint_storage=store) as ctx:
    try:
        out["uuid"] = ctx.checkpoint.upload(mine, {"steps_completed": 4, "per_rank": {str(rank): rank}}, shard=True)
    except RuntimeError as e:
        out["error"] = str(e)
    out["preempt"] = ctx.preempt.should_preempt()
    if rank == 1:
        try:
            ctx.checkpoint.upload(mine)
        except RuntimeError as e:
            out["nonshard_error"] = str(e)
print("RESULT " + json.dumps(out), flush=True)
"""


def run_two_ranks(tmp_path, scenario):
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = str(ROOT / "harness")
    pub, pull = free_ports(2)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(r), str(pub), str(pull), str(store), scenario],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(
            json.loads([entry for entry in out.splitlines() if entry.startswith("RESULT ")][-1][7:])
        )
    return store, results


def test_sharded_upload_unions_the_ranks_files(tmp_path):
    store, (chief, worker) = run_two_ranks(tmp_path, "same")
    assert chief["uuid"] == worker["uuid"]
    stored = store / chief["uuid"]
    assert sorted(p.name for p in stored.iterdir()) == [
        "common.txt",
        "metadata.json",
        "shard0.bin",
        "shard1.bin",
    ]
    assert (stored / "shard1.bin").read_text() == "shard of rank 1"
    assert json.loads((stored / "metadata.json").read_text()) == {
        "steps_completed": 4,
        "per_rank": {"0": 0, "1": 1},
    }
    assert chief["preempt"] is False and worker["preempt"] is False
    assert "only be called by the chief" in worker["nonshard_error"]


def test_sharded_upload_rejects_conflicting_files(tmp_path):
    _, (chief, worker) = run_two_ranks(tmp_path, "differs")
    for result in (chief, worker):
        assert "common.txt (ranks 0, 1)" in result["error"]


def test_merge_metadata():
    assert merge_metadata([{"a": {"x": 1}, "s": 2}, {"a": {"y": 2}, "s": 2}], [0, 1]) == {
        "a": {"x": 1, "y": 2},
        "s": 2,
    }
    with pytest.raises(RuntimeError, match=r"'a.x': rank 0 has 1, rank 1 has 2"):
        merge_metadata([{"a": {"x": 1}}, {"a": {"x": 2}}], [0, 1])
