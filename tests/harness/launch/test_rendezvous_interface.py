"""The launchers' rendezvous interface (issue 31 row 6): across nodes, GLOO_SOCKET_IFNAME and
NCCL_SOCKET_IFNAME name the interface that routes to the chief, unless the user set them."""

from __future__ import annotations

import json

import pytest

from determined.launch import _common, tensorflow, torch_distributed
from determined.launch._common import NodeLayout, rendezvous_interface_environment


def layout(addrs: list[str], rank: int = 1) -> NodeLayout:
    return NodeLayout(container_addrs=addrs, container_rank=rank, slot_ids=[0])


def test_loopback_is_held_by_lo_and_routes_through_it() -> None:
    assert _common.interface_of("127.0.0.1") == "lo"
    assert _common.interface_toward("127.0.0.1") == "lo"
    assert _common.interface_of("203.0.113.77") is None  # no interface holds it
    assert _common.interface_of("not an address") is None


def test_the_interface_is_the_one_holding_the_routed_source_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    routes = {"10.1.0.1": "10.1.0.2", "192.168.9.1": "192.168.9.7"}
    monkeypatch.setattr(_common, "routed_address", routes.get)
    monkeypatch.setattr(
        _common, "_ipv4_interfaces", lambda: {"10.1.0.2": "eth1", "192.168.9.7": "docker0"}
    )
    env = rendezvous_interface_environment(layout(["10.1.0.1", "10.1.0.2"]), {})
    assert env == {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "eth1"}


def test_a_variable_the_user_set_is_kept_and_one_node_gets_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_common, "interface_toward", lambda address: "eth1")
    two = layout(["10.1.0.1", "10.1.0.2"])
    assert rendezvous_interface_environment(two, {"NCCL_SOCKET_IFNAME": "ib0"}) == {
        "GLOO_SOCKET_IFNAME": "eth1"
    }
    both = {"NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "ib0"}
    assert rendezvous_interface_environment(two, both) == {}
    assert rendezvous_interface_environment(layout(["10.1.0.1"], rank=0), {}) == {}
    # The resource manager's own choice wins over the route.
    named = {"DET_INTER_NODE_NETWORK_INTERFACE": "bond0"}
    assert rendezvous_interface_environment(two, named)["GLOO_SOCKET_IFNAME"] == "bond0"


def test_no_route_sets_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common, "routed_address", lambda address: None)
    assert rendezvous_interface_environment(layout(["10.1.0.1", "10.1.0.2"]), {}) == {}


def _launch_env(monkeypatch: pytest.MonkeyPatch, addrs: list[str]) -> None:
    monkeypatch.setenv("DET_SLOT_IDS", "[0]")
    monkeypatch.setenv("DET_CONTAINER_ADDRS", json.dumps(addrs))
    monkeypatch.setenv("DET_CONTAINER_RANK", "1")
    for name in _common.RENDEZVOUS_INTERFACE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_torch_distributed_gives_torchrun_the_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    _launch_env(monkeypatch, ["127.0.0.1", "127.0.0.1"])
    seen: dict = {}

    class Done(Exception):
        pass

    def popen(cmd, env, **kwargs):  # noqa: ANN001, ANN003 - Popen's signature
        seen.update(env)
        raise Done

    monkeypatch.setattr(torch_distributed.subprocess, "Popen", popen)
    with pytest.raises(Done):
        torch_distributed.main(["python3", "train.py"])
    assert seen["GLOO_SOCKET_IFNAME"] == seen["NCCL_SOCKET_IFNAME"] == "lo"


def test_tensorflow_gives_its_workers_the_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    _launch_env(monkeypatch, ["127.0.0.1", "127.0.0.1"])
    seen: dict = {}

    class Done(Exception):
        pass

    def popen(cmd, env, **kwargs):  # noqa: ANN001, ANN003
        seen.update(env)
        raise Done

    monkeypatch.setattr(tensorflow.subprocess, "Popen", popen)
    monkeypatch.setattr(_common.subprocess, "Popen", popen)
    with pytest.raises(Done):
        tensorflow.main(["python3", "train.py"])
    assert seen["NCCL_SOCKET_IFNAME"] == "lo"
