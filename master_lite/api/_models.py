"""Model registry endpoints: models and their versions (the `Models` part does the work)."""

from __future__ import annotations

from typing import Any

from master_lite.api._base import ApiHandlerMixin
from master_lite.api._reads import check_readable

# The fields a PATCH may change; the part checks their values.
MODEL_FIELDS = ("name", "description", "notes", "metadata", "labels")
VERSION_FIELDS = ("name", "comment", "notes", "metadata", "labels")


def _given(body: dict, fields: tuple[str, ...]) -> dict[str, Any]:
    return {field: body[field] for field in fields if field in body}


class ModelsHandler(ApiHandlerMixin):
    async def get(self) -> None:
        args = self.args
        models = self.master.models.list_models(
            model_id=args["id"],
            name=args["name"],
            description=args["description"],
            labels=args["labels"],
            archived=args["archived"],
            sort_by=args["sort_by"],
            order_by=args["order_by"],
        )
        self.send_json({"models": models})

    async def post(self) -> None:
        body = self.body
        model = self.master.models.create_model(
            body.get("name"),
            description=body.get("description") or "",
            notes=body.get("notes") or "",
            metadata=body.get("metadata"),
            labels=body.get("labels"),
            owner_id=self.owner_id(),
        )
        self.send_json({"model": model}, status=201)


class ModelLabelsHandler(ApiHandlerMixin):
    async def get(self) -> None:
        self.send_json({"labels": self.master.models.model_labels()})


class ModelHandler(ApiHandlerMixin):
    async def get(self, model: str) -> None:
        self.send_json({"model": self.master.models.get_model(model)})

    async def patch(self, model: str) -> None:
        changed = self.master.models.patch_model(model, _given(self.body, MODEL_FIELDS))
        self.send_json({"model": changed})

    async def delete(self, model: str) -> None:
        self.master.models.delete_model(model)
        self.send_json({})


class ModelActionHandler(ApiHandlerMixin):
    async def post(self, model: str, action: str) -> None:
        changed = self.master.models.set_archived(model, action == "archive")
        self.send_json({"model": changed})


class ModelVersionsHandler(ApiHandlerMixin):
    async def get(self, model: str) -> None:
        versions = self.master.models.list_versions(model, order_by=self.args["order_by"])
        self.send_json({"model_versions": versions})

    async def post(self, model: str) -> None:
        body = self.body
        checkpoint = body.get("checkpoint_uuid", body.get("checkpointUuid"))
        # read_access "own": only a checkpoint the user may read (else 404).
        check_readable(self.master, self.principal, "checkpoint", [checkpoint])
        version = self.master.models.register_version(
            model,
            checkpoint,
            name=body.get("name") or "",
            comment=body.get("comment") or "",
            notes=body.get("notes") or "",
            metadata=body.get("metadata"),
            labels=body.get("labels"),
        )
        self.send_json({"model_version": version}, status=201)


class ModelVersionHandler(ApiHandlerMixin):
    async def get(self, model: str, version: int) -> None:
        self.send_json({"model_version": self.master.models.get_version(model, version)})

    async def patch(self, model: str, version: int) -> None:
        changed = self.master.models.patch_version(
            model, version, _given(self.body, VERSION_FIELDS)
        )
        self.send_json({"model_version": changed})

    async def delete(self, model: str, version: int) -> None:
        self.master.models.delete_version(model, version)
        self.send_json({})
