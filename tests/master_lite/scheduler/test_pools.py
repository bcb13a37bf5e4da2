"""Resource pools: the master's configuration checked with errors naming the entry, the pools
listed with Determined's JSON names (GET /api/v1/resource-pools, `det resource-pool list`), an
unknown `resources.resource_pool` refused at submit, and a CPU pool's trial given no GPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import requests

from master_lite.scheduler import build_pools, fake_gpus, pick_default
from tests._support import all_logs, child_env, marked_values, submit, wait_for_experiment

GPUS = fake_gpus(4)


def test_without_configuration_one_default_pool_has_every_slot():
    [pool] = build_pools(GPUS, 2, None)
    assert (pool.name, pool.slot_ids, pool.slot_type) == ("default", (0, 1, 2, 3), "cuda")
    [cpu] = build_pools([], 3, [])
    assert (cpu.name, cpu.slot_ids, cpu.slot_type) == ("default", (0, 1, 2), "cpu")


def test_gpu_and_cpu_pools_split_the_slots():
    pools = build_pools(
        GPUS,
        0,
        [
            {"pool_name": "a100", "gpus": [2, 3], "description": "the big ones"},
            {"pool_name": "gpu", "gpus": "all"},
            {"name": "cpu", "cpu_slots": 2},
        ],
    )
    assert [(p.name, p.slot_ids, p.slot_type) for p in pools] == [
        ("a100", (2, 3), "cuda"),
        ("gpu", (0, 1), "cuda"),
        ("cpu", (4, 5), "cpu"),
    ]
    assert pick_default(pools, None) == "a100" and pick_default(pools, "cpu") == "cpu"
    with pytest.raises(ValueError, match="default_resource_pool: 'tpu' is not a pool"):
        pick_default(pools, "tpu")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            [{"pool_name": "x", "gpus": [7]}, {"pool_name": "y", "gpus": "all"}],
            r"resource_pools\[0\].gpus: GPU 7 does not exist",
        ),
        (
            [{"pool_name": "x", "gpus": [0, 1]}, {"pool_name": "y", "gpus": [1]}],
            r"resource_pools\[1\].gpus: GPU 1 is already in pool 'x'",
        ),
        ([{"pool_name": "x", "gpus": [0]}], r"GPUs \[1, 2, 3\] are in no pool"),
        (
            [{"pool_name": "x", "gpus": "all"}, {"pool_name": "x", "cpu_slots": 1}],
            r"resource_pools\[1\].pool_name: 'x' is used by two pools",
        ),
        (
            [{"pool_name": "x", "gpus": "all", "cpu_slots": 1}],
            r"resource_pools\[0\] \(x\): give either gpus or cpu_slots",
        ),
        (
            [{"pool_name": "x", "gpus": "all", "slots": 1}],
            r"resource_pools\[0\]: unknown keys \['slots'\]",
        ),
        ([{"gpus": "all"}], r"resource_pools\[0\].pool_name: expected a non-empty name"),
        (
            [{"pool_name": "x", "gpus": "all"}, {"pool_name": "c", "cpu_slots": -1}],
            r"resource_pools\[1\].cpu_slots: expected a number >= 0",
        ),
    ],
)
def test_bad_pool_configuration_names_the_entry_and_the_key(config, message):
    with pytest.raises(ValueError, match=message):
        build_pools(GPUS, 0, config)


SHOW = """
import json, os
import determined as det
info = det.get_cluster_info()
print("SLOTS " + json.dumps({"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "slot_ids": info.slot_ids}), flush=True)
"""


@pytest.mark.slow
def test_pools_are_listed_named_in_configs_and_keep_cpu_trials_off_the_gpus(start_master, tmp_path):
    pools = [{"pool_name": "gpu", "gpus": "all"}, {"pool_name": "cpu", "cpu_slots": 2}]
    master = start_master(
        cpu_slots=None,
        env={"MASTER_LITE_FAKE_GPUS": "2", "MASTER_LITE_RESOURCE_POOLS": json.dumps(pools)},
    )
    listed = master.session.get("/resource-pools")
    assert listed["pagination"]["total"] == 2
    by_name = {p["name"]: p for p in listed["resourcePools"]}
    assert by_name["gpu"]["slotsAvailable"] == 2 and by_name["gpu"]["slotType"] == "TYPE_CUDA"
    assert by_name["cpu"]["slotsAvailable"] == 2 and by_name["cpu"]["slotType"] == "TYPE_CPU"
    assert by_name["gpu"]["defaultComputePool"] and not by_name["cpu"]["defaultComputePool"]
    assert by_name["gpu"]["schedulerType"] == "SCHEDULER_TYPE_FAIR_SHARE"
    slots = master.session.get("/resources")["slots"]
    assert [(s["id"], s["type"], s["pool"]) for s in slots] == [
        (0, "gpu", "gpu"),
        (1, "gpu", "gpu"),
        (2, "cpu", "cpu"),
        (3, "cpu", "cpu"),
    ]

    config = {
        "name": "pooled",
        "entrypoint": "python3 show.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "resources": {"resource_pool": "tpu"},
    }
    refused = requests.post(
        f"{master.url}/api/v1/experiments",
        json={"config": json.dumps(config)},
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=30,
    )
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert "resources.resource_pool: 'tpu' is not a resource pool" in message
    assert "det resource-pool list" in message and "gpu, cpu" in message

    config["resources"]["resource_pool"] = "cpu"
    exp_id = submit(master, config, {"show.py": SHOW})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED", all_logs(master, exp_id)
    (shown,) = marked_values(all_logs(master, exp_id), "SLOTS")
    assert shown["cuda"] == "" and shown["slot_ids"][0] in (2, 3), shown

    env = child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token})
    out = subprocess.run(
        [sys.executable, "-m", "determined.cli", "resource-pool", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()]
    assert rows[0][0] == "Name" and {r[0] for r in rows[2:]} >= {"gpu", "cpu"}, out.stdout
