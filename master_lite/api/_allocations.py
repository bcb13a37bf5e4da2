"""Allocation signals (preemption), slots, and what the master is."""

from __future__ import annotations

from typing import Any

from determined.common import harness
from master_lite.api._base import ApiHandlerMixin


def cluster_status(master: Any) -> dict | None:
    """The Ray connection's state (resource_manager ray; None otherwise or before start):
    "waiting for the Ray cluster at …" while the cluster is away (docs/distributed.md)."""
    runner = getattr(getattr(master, "runs", None), "runner", None)
    status = getattr(runner, "cluster_status", None)
    return status() if callable(status) else None


def master_info(master: Any) -> dict:
    # The harness's version is the API version we implement.
    info = {
        "version": harness.VERSION,
        "root_dir": str(master.root_dir),
        "cluster_id": master.cluster_id,
        # Hosted by a Jupyter server: the experiment views are JupyterLab's (`<lab>?det-experiment=ID`).
        "jupyterlab": getattr(master, "jupyter_host", None) is not None,
    }
    cluster = cluster_status(master)
    if cluster is not None:
        info["cluster"] = cluster
    return info


class PreemptionHandler(ApiHandlerMixin):
    async def get(self, allocation_id: str) -> None:
        preempt = await self.call(
            self.master.runs.wait_preemption, allocation_id, self.args["timeout_seconds"]
        )
        answer: dict = {"preempt": bool(preempt)}
        if preempt:
            # Extensions Determined's harness ignores: why, and how long the run has to exit.
            answer.update(self.master.runs.preemption_reason(allocation_id))
        self.send_json(answer)


class AckPreemptionHandler(ApiHandlerMixin):
    async def post(self, allocation_id: str) -> None:
        self.master.runs.ack_preemption(allocation_id)
        self.send_json({})


class ResourcesHandler(ApiHandlerMixin):
    async def get(self) -> None:
        answer = self.master.runs.resources()
        cluster = cluster_status(self.master)
        if cluster is not None:
            answer["cluster"] = cluster
        self.send_json(answer)


class ResourcePoolsHandler(ApiHandlerMixin):
    async def get(self) -> None:
        self.send_json(self.master.runs.scheduler.pools_json())


class MasterInfoHandler(ApiHandlerMixin):
    async def get(self) -> None:
        self.send_json(master_info(self.master))
