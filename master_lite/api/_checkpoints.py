"""Checkpoint endpoints: trials register and read them; people download them."""

from __future__ import annotations

from master_lite.api._base import ApiHandlerMixin, checkpoint_trial_id
from master_lite.api._permissions import check_owner


def checkpoint_record(body: dict) -> dict:
    """The facade's record from the harness's camelCase body."""
    return {
        "uuid": body["uuid"],
        "trial_id": checkpoint_trial_id(body),
        "allocation_id": body.get("allocationId"),
        "metadata": body.get("metadata") or {},
        # Sizes may arrive as strings (Determined's int64 encoding); the record holds ints.
        "resources": {path: int(size) for path, size in (body.get("resources") or {}).items()},
        "report_time": body.get("reportTime"),
        "state": body.get("state", "COMPLETED"),
        "storage_id": body.get("storageId"),
    }


class CheckpointsHandler(ApiHandlerMixin):
    async def post(self) -> None:
        # A user token reports into its own trials only (or an admin's into any).
        check_owner(
            self.master, self.principal, "trial", checkpoint_trial_id(self.body), "report to"
        )
        record = checkpoint_record(self.body)
        # A container trial's files go from its view into the storage first (off the loop).
        await self.master.checkpoints.place_container_checkpoint(record)
        self.send_json({"checkpoint": self.master.checkpoints.report_checkpoint(record)})

    async def patch(self) -> None:
        self.master.checkpoints.mark_checkpoints_deleted(self.body["checkpoints"])
        self.send_json({})


class CheckpointHandler(ApiHandlerMixin):
    async def get(self, uuid: str) -> None:
        self.send_json({"checkpoint": self.master.checkpoints.get_checkpoint(uuid)})

    async def patch(self, uuid: str) -> None:
        checkpoint = self.master.checkpoints.set_checkpoint_metadata(uuid, self.body["metadata"])
        self.send_json({"checkpoint": checkpoint})

    async def delete(self, uuid: str) -> None:
        self.send_json({"checkpoint": self.master.delete_checkpoint(uuid)})


class CheckpointSnippetHandler(ApiHandlerMixin):
    async def get(self, uuid: str) -> None:
        self.send_json(self.master.checkpoints.checkpoint_snippet(uuid))


class CheckpointDownloadHandler(ApiHandlerMixin):
    async def get(self, uuid: str) -> None:
        await self.send_bytes(
            self.master.checkpoints.checkpoint_archive(uuid),
            "application/gzip",
            f"checkpoint-{uuid}.tar.gz",
        )


class CheckpointModelVersionsHandler(ApiHandlerMixin):
    async def get(self, uuid: str) -> None:
        self.send_json({"model_versions": self.master.models.checkpoint_versions(uuid)})
