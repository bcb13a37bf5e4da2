"""A workspace's scheduling settings (docs/scheduling.md, "Workspace quotas and default pools"):

* its default compute pool (Determined's `defaultComputePool`): the resource pool of a new
  experiment in it whose config names none (written into the experiment's config at creation,
  as Determined fills it); a pool that does not exist is refused when set and at submission;
* its slot quota (Determined's workspace resource quota, `clusterQuotaPairs`): the most slots
  its experiments may hold at once, over all pools; set by admins; the scheduler holds the
  others back with the reason "waiting: workspace NAME is at its N-slot quota".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from master_lite import errors
from master_lite.store import Store


def check_pool(value: Any, pools: Collection[str], field: str) -> str:
    """A pool name for a workspace's default ('' : the master's default); InvalidRequest naming
    `field` and the pools otherwise."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise errors.InvalidRequest(f"{field}: expected a resource pool's name, got {value!r}")
    if value not in pools:
        raise errors.InvalidRequest(
            f"{field}: {value!r} is not a resource pool of this master (pools: "
            f"{', '.join(pools)}; `det resource-pool list` shows them)"
        )
    return value


def check_quota_pairs(pairs: Any) -> tuple[bool, int | None]:
    """Determined's `clusterQuotaPairs` ({cluster name: slots}) for this master, one cluster:
    (whether a quota was given, the quota). A value of null removes the quota (our addition);
    InvalidRequest for anything else."""
    if pairs is None or pairs == {}:
        return False, None
    if not isinstance(pairs, Mapping) or len(pairs) != 1:
        raise errors.InvalidRequest(
            'clusterQuotaPairs: this master is one cluster: give one quota, e.g. {"": 4}'
        )
    [quota] = pairs.values()
    if quota is None:
        return True, None
    if isinstance(quota, bool) or not isinstance(quota, int) or quota < 0:
        raise errors.InvalidRequest(
            f"clusterQuotaPairs: a quota is a number of slots >= 0 (or null for none), "
            f"got {quota!r}"
        )
    return True, quota


def fill_default_pool(store: Store, project_id: int, config: dict, pools: Collection[str]) -> None:
    """Put the workspace's default compute pool into a new experiment's config when the config
    names none; InvalidRequest when that pool no longer exists (the master was restarted with
    other pools), saying how to fix it."""
    resources = config.get("resources")
    if isinstance(resources, dict) and resources.get("resource_pool"):
        return
    workspace = store.workspaces.of_project(project_id)
    if workspace is None or not workspace.default_compute_pool:
        return
    pool = workspace.default_compute_pool
    if pool not in pools:
        raise errors.InvalidRequest(
            f"workspace {workspace.name!r} has the default resource pool {pool!r}, which is not "
            f"a pool of this master (pools: {', '.join(pools)}): set "
            "resources.resource_pool, or change the workspace's default "
            f"(det workspace edit {workspace.name!r} --default-compute-pool POOL)"
        )
    config["resources"] = {
        **(resources if isinstance(resources, dict) else {}),
        "resource_pool": pool,
    }


__all__ = ["check_pool", "check_quota_pairs", "fill_default_pool"]
