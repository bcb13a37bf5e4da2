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


def test_a_trial_avoids_its_lost_nodes_unless_they_are_all_that_is_left():
    from master_lite.runners.ray._connection import RayConnection
    from master_lite.runners.ray._proxy import RayRunner

    connection = RayConnection("127.0.0.1:1", inventory=RayInventory())
    runner = RayRunner(connection, log_sink=lambda records: None, on_exit=lambda a, c: None)
    runner._runs["trial-4.1"] = 4
    runner.message(("exit", "trial-4.1", 137, {"node_id": "a", "cause": "node x was lost"}))
    assert runner.lost_cause("trial-4.1") == "node x was lost"
    assert runner.lost_cause("trial-4.1") is None  # asked once
    connection._shape([node("a", gpus=1), node("b", gpus=1)])
    assert runner._avoided(4, "default") == {"a"}
    assert runner._avoided(5, "default") == set()  # another trial: no history
    connection._shape([node("a", gpus=1)])  # only the avoided node is left: try it again
    assert runner._avoided(4, "default") == set()


def test_a_connection_to_nothing_waits_says_so_and_does_not_block():
    import socket

    from master_lite.runners.ray._connection import RayConnection
    from tests._support import wait_until

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"  # nothing listens there once closed
    connection = RayConnection(address, inventory=RayInventory())
    connection.start()  # returns at once
    try:
        wait_until(lambda: connection.state == "waiting", timeout=120, what="the waiting state")
        status = connection.status()
        assert status["message"].startswith(
            f"waiting for the Ray cluster at {address}: nothing answers at {address}"
        )
        assert status["nodes"] == [] and connection.pools[0].slot_ids == ()
        assert connection.send(("signal", "trial-1.1", 15)) is False  # no driver to tell
    finally:
        connection.close(timeout=5)
