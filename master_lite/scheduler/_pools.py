"""Resource pools: named sets of the master's slots (Determined's `resource_pools`).

Without configuration there is one pool, `default`, with every slot (GPUs, else CPU slots).
Configured (`MasterLite.resource_pools`), each pool is a mapping:

* `pool_name` (Determined's key; `name` also accepted): the pool's name;
* `gpus`: the indexes of the GPUs it has (a list, or "all" for every GPU not in another pool);
* `cpu_slots`: a number of CPU slots it has (slot ids follow the GPUs' indexes);
* `description` (optional).

A pool has `gpus` or `cpu_slots`, not both; a GPU is in one pool at most; every GPU is in some
pool. The default pool for experiments that name none is `default_resource_pool` (Determined's
`default_compute_resource_pool`), else the first pool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from master_lite.scheduler._gpus import GPU
from master_lite.scheduler._policy import DEFAULT_POOL


@dataclasses.dataclass(frozen=True)
class Pool:
    name: str
    slot_ids: tuple[int, ...]
    slot_type: str  # "cuda" | "cpu"
    description: str = ""


def build_pools(
    gpus: Sequence[GPU], cpu_slots: int, config: Sequence[Mapping[str, Any]] | None
) -> list[Pool]:
    """The pools of a master with `gpus` (else `cpu_slots` CPU slots) from `config`; ValueError
    naming the entry and the key for a bad one."""
    if not config:
        if gpus:
            return [Pool(DEFAULT_POOL, tuple(g.index for g in gpus), "cuda")]
        return [Pool(DEFAULT_POOL, tuple(range(cpu_slots)), "cpu")]
    indexes = [g.index for g in gpus]
    next_cpu = max(indexes) + 1 if indexes else 0
    owner: dict[int, str] = {}
    pools: list[Pool] = []
    seen: set[str] = set()
    pending_all: list[tuple[int, str, str]] = []
    for n, entry in enumerate(config):
        where = f"resource_pools[{n}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected a mapping with pool_name and gpus or cpu_slots")
        unknown = set(entry) - {"pool_name", "name", "gpus", "cpu_slots", "description"}
        if unknown:
            raise ValueError(
                f"{where}: unknown keys {sorted(unknown)} (known: pool_name, gpus, cpu_slots, "
                "description)"
            )
        name = entry.get("pool_name", entry.get("name"))
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}.pool_name: expected a non-empty name")
        if name in seen:
            raise ValueError(f"{where}.pool_name: {name!r} is used by two pools")
        seen.add(name)
        description = str(entry.get("description") or "")
        has_gpus, has_cpus = "gpus" in entry, "cpu_slots" in entry
        if has_gpus == has_cpus:
            raise ValueError(f"{where} ({name}): give either gpus or cpu_slots")
        if has_cpus:
            count = entry["cpu_slots"]
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(f"{where}.cpu_slots: expected a number >= 0, got {count!r}")
            ids = tuple(range(next_cpu, next_cpu + count))
            next_cpu += count
            pools.append(Pool(name, ids, "cpu", description))
            continue
        wanted = entry["gpus"]
        if wanted == "all":
            pending_all.append((len(pools), name, description))
            pools.append(Pool(name, (), "cuda", description))
            continue
        if not isinstance(wanted, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in wanted
        ):
            raise ValueError(f"{where}.gpus: expected a list of GPU indexes or 'all'")
        for index in wanted:
            if index not in indexes:
                raise ValueError(
                    f"{where}.gpus: GPU {index} does not exist (this machine has GPUs "
                    f"{indexes or 'none'})"
                )
            if index in owner:
                raise ValueError(f"{where}.gpus: GPU {index} is already in pool {owner[index]!r}")
            owner[index] = name
        pools.append(Pool(name, tuple(wanted), "cuda", description))
    rest = tuple(i for i in indexes if i not in owner)
    if len(pending_all) > 1:
        raise ValueError("resource_pools: only one pool may have gpus: all")
    for position, name, description in pending_all:
        pools[position] = Pool(name, rest, "cuda", description)
        rest = ()
    if rest:
        raise ValueError(
            f"resource_pools: GPUs {list(rest)} are in no pool (add them to one, or give one "
            "pool gpus: all)"
        )
    return pools


def pick_default(pools: Sequence[Pool], default: str | None) -> str:
    """The default pool's name; ValueError when `default` names no pool."""
    names = [p.name for p in pools]
    if default:
        if default not in names:
            raise ValueError(
                f"default_resource_pool: {default!r} is not a pool (pools: {', '.join(names)})"
            )
        return default
    return names[0]


def pool_json(pool: Pool, *, used: int, scheduler: str, default: bool) -> dict:
    """A pool as Determined's `ResourcePool` JSON (the fields that mean something here)."""
    return {
        "name": pool.name,
        "description": pool.description,
        "type": "RESOURCE_POOL_TYPE_STATIC",
        "numAgents": 1,
        "slotsAvailable": len(pool.slot_ids),
        "slotsUsed": used,
        "slotType": "TYPE_CUDA" if pool.slot_type == "cuda" else "TYPE_CPU",
        "auxContainerCapacity": 0,
        "auxContainersRunning": 0,
        "defaultComputePool": default,
        "defaultAuxPool": default,
        "preemptible": True,
        "minAgents": 1,
        "maxAgents": 1,
        "slotsPerAgent": len(pool.slot_ids),
        "schedulerType": (
            "SCHEDULER_TYPE_PRIORITY" if scheduler == "priority" else "SCHEDULER_TYPE_FAIR_SHARE"
        ),
        "location": "on-prem",
        "accelerator": "",
    }


def pools_json(
    pools: Sequence[Pool], used: Mapping[str, int], *, scheduler: str, default: str
) -> dict:
    """Determined's GetResourcePoolsResponse: every pool, one page."""
    items = [
        pool_json(p, used=used.get(p.name, 0), scheduler=scheduler, default=p.name == default)
        for p in pools
    ]
    total = len(items)
    return {
        "resourcePools": items,
        "pagination": {
            "offset": 0,
            "limit": 0,
            "startIndex": 0,
            "endIndex": total,
            "total": total,
        },
    }


__all__ = ["Pool", "build_pools", "pick_default", "pool_json", "pools_json"]
