"""Two real ranks (DistributedContext over ZMQ) with s3 checkpoint storage: sharded saves put
every rank's files in the bucket (each rank uploads its own), and a node's ranks restore through
one download by local rank 0 that holds what either selector wants."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import uuid

import pytest

from tests._support import free_ports

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[3]

RANK = r"""
import json, pathlib, sys
import determined as det
from determined.core import DistributedContext
rank, pub, pull, config = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
dist = DistributedContext(rank=rank, size=2, local_rank=rank, local_size=2, cross_rank=0, cross_size=1,
                          pub_port=pub, pull_port=pull, timeout=60)
out = {}
with det.core.init(distributed=dist, checkpoint_storage=config) as ctx:
    with ctx.checkpoint.store_path({"steps_completed": 2, "rank": {str(rank): rank}}, shard=True) as (path, sid):
        (path / f"part{rank}.bin").write_text(f"part of rank {rank}")
    out["stored"] = sid
    wanted = f"part{rank}.bin"
    with ctx.checkpoint.restore_path(sid, selector=lambda p: p == wanted) as path:
        out["seen"] = sorted(p.name for p in path.iterdir())
        out["mine"] = (path / wanted).read_text()
    mine = pathlib.Path(sys.argv[5]) / f"rank{rank}"
    mine.mkdir(parents=True)
    (mine / f"shard{rank}.bin").write_text(f"shard of rank {rank}")
    out["uploaded"] = ctx.checkpoint.upload(mine, {"steps_completed": 4}, shard=True)
print("RESULT " + json.dumps(out), flush=True)
"""


def test_sharded_saves_and_a_shared_restore(s3_server, tmp_path):
    bucket = f"r-{uuid.uuid4().hex[:10]}"
    s3_server.create_bucket(bucket)
    config = json.dumps(s3_server.storage_config(bucket))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = str(ROOT / "harness")
    pub, pull = free_ports(2)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(r), str(pub), str(pull), config, str(tmp_path)],
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
        results.append(json.loads([x for x in out.splitlines() if x.startswith("RESULT ")][-1][7:]))
    chief, worker = results
    stored = chief["stored"]
    assert worker["stored"] == stored and worker["uploaded"] == chief["uploaded"]
    assert s3_server.keys(bucket, stored) == [
        f"{stored}/metadata.json",
        f"{stored}/part0.bin",
        f"{stored}/part1.bin",
    ]
    metadata = s3_server.client().get_object(Bucket=bucket, Key=f"{stored}/metadata.json")
    assert json.loads(metadata["Body"].read()) == {"steps_completed": 2, "rank": {"0": 0, "1": 1}}
    # One download for both: it holds what either selector wants.
    for rank, result in enumerate(results):
        assert result["seen"] == ["part0.bin", "part1.bin"]
        assert result["mine"] == f"part of rank {rank}"
    uploaded = chief["uploaded"]
    assert s3_server.keys(bucket, uploaded) == [
        f"{uploaded}/metadata.json",
        f"{uploaded}/shard0.bin",
        f"{uploaded}/shard1.bin",
    ]
