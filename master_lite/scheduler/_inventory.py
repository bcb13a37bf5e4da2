"""The scheduler's slots on Ray: read from the cluster's alive nodes, again whenever they change
(the Ray runner's connection hands each node list to `RayInventory.update`).

Rules (docs/distributed.md, "Cluster shape"; docs/scheduling.md, "Ray pools"):

* A node's slots are its GPUs (Ray's `GPU` resource); a node without GPUs has its CPUs as slots.
* A node belongs to the pool its label `det-pool` names (`ray start --labels det-pool=NAME`);
  a node without that label belongs to the default pool. A pool with at least one GPU node is a
  GPU pool: its slots are its GPU nodes' GPUs (its CPU-only nodes add none, since its runs ask
  Ray for `{"GPU": 1}` bundles); any other pool's slots are its nodes' CPUs.
* Slot ids stay with their node while it is alive and are never reused: a node that leaves takes
  its slots out of the scheduler (and out of GET /resources); one that joins adds fresh ones.
* A pool once seen (or configured) stays, with 0 slots when none of its nodes is alive, so
  experiments that name it wait instead of being refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from master_lite.scheduler._policy import DEFAULT_POOL
from master_lite.scheduler._pools import Pool

POOL_LABEL = "det-pool"


def ray_pool_config(config: Sequence[Mapping[str, Any]] | None) -> dict[str, str]:
    """The pools `resource_pools` names on Ray ({name: description}); ValueError for an entry
    that gives slots (a Ray pool's slots are its nodes')."""
    pools: dict[str, str] = {}
    for n, entry in enumerate(config or []):
        where = f"resource_pools[{n}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected a mapping with pool_name")
        extra = set(entry) & {"gpus", "cpu_slots"}
        if extra:
            raise ValueError(
                f"{where}: {', '.join(sorted(extra))} cannot be set on Ray: a pool's slots are "
                f"its nodes' (start a node with --labels {POOL_LABEL}=NAME); give only "
                "pool_name and description"
            )
        unknown = set(entry) - {"pool_name", "name", "description"}
        if unknown:
            raise ValueError(
                f"{where}: unknown keys {sorted(unknown)} (known: pool_name, description)"
            )
        name = entry.get("pool_name", entry.get("name"))
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}.pool_name: expected a non-empty name")
        if name in pools:
            raise ValueError(f"{where}.pool_name: {name!r} is used by two pools")
        pools[name] = str(entry.get("description") or "")
    return pools


def node_pool(node: Mapping[str, Any], default: str) -> str:
    """The pool a node (as `RayCluster.nodes` lists it) belongs to."""
    labels = node.get("labels") or {}
    name = labels.get(POOL_LABEL) if isinstance(labels, Mapping) else None
    return str(name) if name else default


class RayInventory:
    """Turns successive node lists into the scheduler's pools, keeping slot ids stable."""

    def __init__(self, configured: Mapping[str, str] | None = None, default: str | None = None):
        self.descriptions = dict(configured or {})
        self.default = default or next(iter(self.descriptions), DEFAULT_POOL)
        self.descriptions.setdefault(self.default, "")
        self._ids = itertools.count()
        self._node_slots: dict[tuple[str, str], tuple[int, ...]] = {}
        self.node_of_slot: dict[int, dict] = {}
        self.slot_type: dict[str, str] = {}  # pool -> "cuda" | "cpu" (last seen)
        self.label = POOL_LABEL

    def pool_of(self, node: Mapping[str, Any]) -> str:
        return node_pool(node, self.default)

    def update(self, nodes: Sequence[Mapping[str, Any]]) -> list[Pool]:
        alive = [n for n in nodes if n.get("alive")]
        by_pool: dict[str, list[Mapping[str, Any]]] = {}
        for node in alive:
            by_pool.setdefault(node_pool(node, self.default), []).append(node)
        for name in by_pool:
            self.descriptions.setdefault(name, "")
        pools: list[Pool] = []
        kept: dict[tuple[str, str], tuple[int, ...]] = {}
        self.node_of_slot = {}
        for name, description in self.descriptions.items():
            members = by_pool.get(name, [])
            gpu_pool = any(_count(n, "GPU") for n in members)
            kind = "cuda" if gpu_pool else "cpu"
            if members or name not in self.slot_type:
                self.slot_type[name] = kind
            ids: list[int] = []
            for node in sorted(members, key=lambda n: str(n.get("node_id"))):
                count = _count(node, "GPU" if gpu_pool else "CPU")
                key = (str(node.get("node_id")), kind)
                have = self._node_slots.get(key, ())
                if len(have) < count:
                    have = have + tuple(next(self._ids) for _ in range(count - len(have)))
                kept[key] = have = have[:count]
                ids.extend(have)
                for slot in have:
                    self.node_of_slot[slot] = {
                        "node_id": node.get("node_id"),
                        "address": node.get("address"),
                    }
            pools.append(Pool(name, tuple(ids), self.slot_type[name], description))
        self._node_slots = kept
        return pools


def _count(node: Mapping[str, Any], resource: str) -> int:
    resources = node.get("resources") or {}
    try:
        return int(float(resources.get(resource, 0)))
    except (TypeError, ValueError):
        return 0


__all__ = ["POOL_LABEL", "RayInventory", "node_pool", "ray_pool_config"]
