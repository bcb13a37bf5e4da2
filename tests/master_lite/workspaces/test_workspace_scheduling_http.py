"""A workspace's scheduling settings over HTTP against a real Master (docs/scheduling.md,
"Workspace quotas and default pools"): its default compute pool (Determined's
`defaultComputePool`) goes into the config of a new experiment that names no pool, an unknown
pool is refused where it is set and at submission; its slot quota (Determined's
`set-resource-quota`) is set by admins only and reaches the scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from master_lite._master import Master
from tests.master_lite.users.test_users_http import Api, serving
from tests.master_lite.workspaces.test_workspaces_http import _submit

POOLS = [{"pool_name": "small", "cpu_slots": 1}, {"pool_name": "big", "cpu_slots": 2}]


def with_pools(test: Callable) -> Callable:
    """Run an async test against a started Master with the pools `small` and `big`."""

    def wrapper(tmp_path: Path) -> None:
        async def body() -> None:
            async with serving(Master(tmp_path, gpus=[], resource_pools=POOLS)) as api:
                await test(api)

        asyncio.run(asyncio.wait_for(body(), 120))

    wrapper.__name__ = test.__name__
    return wrapper


async def _pool_of(api: Api, experiment_id: int) -> str | None:
    status, answer = await api.call("GET", f"/experiments/{experiment_id}")
    assert status == 200, answer
    return (answer["experiment"]["config"].get("resources") or {}).get("resource_pool")


@with_pools
async def test_a_workspaces_default_pool_is_where_its_experiments_without_one_go(api: Api) -> None:
    status, answer = await api.call(
        "POST", "/workspaces", {"name": "ml", "defaultComputePool": "tpu"}
    )
    assert status == 400
    assert "defaultComputePool: 'tpu' is not a resource pool of this master" in answer["message"]
    assert "pools: small, big" in answer["message"]
    status, answer = await api.call(
        "POST", "/workspaces", {"name": "ml", "defaultComputePool": "big"}
    )
    assert status == 200, answer
    workspace = answer["workspace"]
    assert workspace["defaultComputePool"] == "big" and workspace["resourceQuota"] is None
    status, answer = await api.call(
        "POST", f"/workspaces/{workspace['id']}/projects", {"name": "p"}
    )
    project_id = answer["project"]["id"]

    status, created = await _submit(api, projectId=project_id)
    assert status == 201, created
    assert await _pool_of(api, created["experiment"]["id"]) == "big"
    named = {"resources": {"resource_pool": "small"}}
    status, created = await _submit(api, projectId=project_id, config=named)
    assert await _pool_of(api, created["experiment"]["id"]) == "small"  # its own pool wins
    status, created = await _submit(api)  # the default workspace: the master's default pool
    assert await _pool_of(api, created["experiment"]["id"]) is None

    # Edited (Determined's PatchWorkspace field): an unknown pool refused, '' back to none.
    path = f"/workspaces/{workspace['id']}"
    status, answer = await api.call("PATCH", path, {"defaultComputeResourcePool": "gpu"})
    assert status == 400 and "'gpu' is not a resource pool" in answer["message"]
    status, answer = await api.call("PATCH", path, {"defaultComputeResourcePool": None})
    assert status == 200 and answer["workspace"]["defaultComputePool"] == "big"  # unchanged
    status, answer = await api.call("PATCH", path, {"defaultComputeResourcePool": ""})
    assert status == 200 and answer["workspace"]["defaultComputePool"] is None
    status, created = await _submit(api, projectId=project_id)
    assert await _pool_of(api, created["experiment"]["id"]) is None

    # A default pool that the master no longer has (restarted with other pools) is named.
    api.master.store.workspaces.set_default_pool(workspace["id"], "gone")
    status, answer = await _submit(api, projectId=project_id)
    assert status == 400
    assert "workspace 'ml' has the default resource pool 'gone'" in answer["message"]
    assert "det workspace edit 'ml' --default-compute-pool POOL" in answer["message"]


@with_pools
async def test_only_admins_set_a_workspace_quota_and_the_scheduler_applies_it(api: Api) -> None:
    await api.user("wsquota_alice")
    alice = await api.login("wsquota_alice")
    status, answer = await api.call("POST", "/workspaces", {"name": "a"}, token=alice)
    assert status == 200, answer
    workspace_id = answer["workspace"]["id"]
    quota_path = f"/workspaces/{workspace_id}/set-resource-quota"
    # Its owner may set its default pool, not its quota (Determined: admins only).
    status, answer = await api.call(
        "PATCH", f"/workspaces/{workspace_id}", {"defaultComputeResourcePool": "big"}, token=alice
    )
    assert status == 200 and answer["workspace"]["defaultComputePool"] == "big"
    status, answer = await api.call("POST", quota_path, {"clusterQuotaPairs": {"": 1}}, token=alice)
    assert status == 403 and "only an admin may set the resource quota of" in answer["message"]
    status, answer = await api.call(
        "POST", "/workspaces", {"name": "b", "clusterQuotaPairs": {"": 1}}, token=alice
    )
    assert status == 403 and "only an admin may set resource quotas" in answer["message"]
    assert api.master.runs.scheduler.policy.workspace_max_slots == {}

    status, answer = await api.call("POST", quota_path, {"clusterQuotaPairs": {"": 2}})
    assert status == 200, answer
    status, answer = await api.call("GET", f"/workspaces/{workspace_id}")
    assert answer["workspace"]["resourceQuota"] == 2
    status, answer = await api.call("GET", f"/workspaces/{workspace_id}/get-k8s-resource-quotas")
    assert answer == {"resourceQuotas": {"": 2.0}}
    assert api.master.runs.scheduler.policy.workspace_max_slots == {workspace_id: 2}
    status, answer = await api.call(
        "POST", "/workspaces", {"name": "c", "clusterQuotaPairs": {"": 3}}
    )
    assert status == 200 and answer["workspace"]["resourceQuota"] == 3
    c_id = answer["workspace"]["id"]
    assert api.master.runs.scheduler.policy.workspace_max_slots == {workspace_id: 2, c_id: 3}

    for bad, why in (
        ({"": -1}, "clusterQuotaPairs.: -1 is less than the minimum of 0"),
        ({"x": 1, "y": 2}, "one cluster"),
    ):
        status, answer = await api.call("POST", quota_path, {"clusterQuotaPairs": bad})
        assert status == 400 and why in answer["message"], answer
    status, answer = await api.call("POST", quota_path, {"clusterQuotaPairs": {"": None}})
    assert status == 200, answer
    status, answer = await api.call("GET", f"/workspaces/{workspace_id}/get-k8s-resource-quotas")
    assert answer == {"resourceQuotas": {}}
    assert api.master.runs.scheduler.policy.workspace_max_slots == {c_id: 3}
