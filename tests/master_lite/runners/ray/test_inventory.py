"""The scheduler's slots on Ray follow the cluster's nodes (`_inventory`), the label selectors
of pools and avoided nodes (`_faults.selector`), and `Scheduler.replace_pools`: no Ray needed."""

from __future__ import annotations

import pytest

from master_lite.runners.ray._faults import selector, silent_ranks
from master_lite.scheduler import AllocationRequest, RayInventory, Scheduler, ray_pool_config


def node(node_id: str, *, gpus: int = 0, cpus: int = 4, pool: str | None = None, alive=True):
    return {
        "node_id": node_id,
        "address": f"10.0.0.{len(node_id)}",
        "alive": alive,
        "resources": {"CPU": float(cpus), **({"GPU": float(gpus)} if gpus else {})},
        "labels": {"det-pool": pool} if pool else {},
    }


def by_name(pools):
    return {p.name: p for p in pools}


def test_gpu_nodes_are_gpu_slots_and_ids_stay_with_their_node():
    inventory = RayInventory()
    first = by_name(inventory.update([node("a", gpus=2), node("b", cpus=8)]))
    assert first["default"].slot_type == "cuda"  # a pool with a GPU node counts GPUs only
    assert len(first["default"].slot_ids) == 2
    a_ids = first["default"].slot_ids
    joined = by_name(inventory.update([node("a", gpus=2), node("c", gpus=1)]))
    assert set(a_ids) <= set(joined["default"].slot_ids)  # a's slots kept their ids
    assert len(joined["default"].slot_ids) == 3
    left = by_name(inventory.update([node("c", gpus=1), node("a", gpus=2, alive=False)]))
    assert len(left["default"].slot_ids) == 1 and not set(a_ids) & set(left["default"].slot_ids)
    assert inventory.node_of_slot[left["default"].slot_ids[0]]["node_id"] == "c"


def test_cpu_only_clusters_count_cpus_and_labels_name_pools_that_stay():
    inventory = RayInventory({"default": "", "big": "the big ones"})
    pools = by_name(inventory.update([node("a", cpus=2), node("b", cpus=3, pool="big")]))
    assert (len(pools["default"].slot_ids), pools["default"].slot_type) == (2, "cpu")
    assert (len(pools["big"].slot_ids), pools["big"].description) == (3, "the big ones")
    gone = by_name(inventory.update([node("a", cpus=2)]))
    assert gone["big"].slot_ids == ()  # kept, empty: experiments naming it wait
    assert by_name(inventory.update([]))["default"].slot_ids == ()  # the cluster is away


def test_pools_configured_on_ray_name_pools_only():
    assert ray_pool_config([{"pool_name": "gpu", "description": "d"}]) == {"gpu": "d"}
    with pytest.raises(ValueError, match=r"resource_pools\[0\]: cpu_slots cannot be set on Ray"):
        ray_pool_config([{"pool_name": "x", "cpu_slots": 2}])
    with pytest.raises(ValueError, match="used by two pools"):
        ray_pool_config([{"pool_name": "x"}, {"pool_name": "x"}])


def test_selectors_name_the_pool_and_the_avoided_nodes():
    label = {"label": "det-pool"}
    assert selector("default", default=True, pools=["default"], avoid=[], **label) == {}
    assert selector("default", default=True, pools=["default", "b", "a"], avoid=[], **label) == {
        "det-pool": "!in(a,b)"
    }
    assert selector("a", default=False, pools=["default", "a"], avoid=["n2", "n1"], **label) == {
        "det-pool": "a",
        "ray.io/node-id": "!in(n1,n2)",
    }


def test_a_rank_silent_past_the_heartbeat_is_named():
    assert silent_ranks({0: 100.0, 1: 109.0}, [0, 1], now=111.0) == [0]
    assert silent_ranks({0: 100.0}, [], now=200.0) == []  # nothing outstanding


def test_the_scheduler_follows_a_new_shape():
    scheduler = Scheduler([], pools={"default": []})
    scheduler.request(AllocationRequest("trial-1", 1, slots=2))
    assert scheduler.step().grants == []  # no slots yet: it waits
    pools = RayInventory().update([node("a", gpus=2)])
    scheduler.replace_pools(pools)
    (grant,) = scheduler.step().grants
    assert set(grant.slot_ids) == set(pools[0].slot_ids)
    assert scheduler.slot_type(grant.slot_ids[0]) == "cuda"
    scheduler.replace_pools([])  # the node left: the pool stays, empty; the grant keeps its slots
    assert scheduler.pools == {"default": []} and scheduler.slot_ids == []
    pools_json = scheduler.pools_json()["resourcePools"]
    assert [(p["name"], p["slotsAvailable"], p["slotsUsed"]) for p in pools_json] == [
        ("default", 0, 2)
    ]
