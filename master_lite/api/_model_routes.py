"""The routes under /models: the model registry (models, their versions, the checkpoint each
version names). `_routes.py` joins them into the one route table.

A `{model}` path segment is a model's name or, when it is only digits, its id (model names
cannot be only digits), as in Determined's `GET /api/v1/models/{modelName}`.
"""

from __future__ import annotations

from typing import Any

from master_lite.api import _models
from master_lite.api._declarations import Listing, Operation, Owner, Param, PathParam, Route
from master_lite.api._openapi import EMPTY, INTEGER, OBJECT, STRING, array, obj, ref
from master_lite.api._schemas import DESCRIPTION, LABELS, NAME, NOTES
from master_lite.models import MODEL_ORDERS

MODEL = PathParam("model", r"[^/]+", STRING, str, "model name, or model id (digits)")
VERSION = PathParam("version", r"[0-9]+", INTEGER, int, "model version number")
MODEL_ACTION = PathParam(
    "action",
    "archive|unarchive",
    {**STRING, "enum": ["archive", "unarchive"]},
    str,
    "what to do with the model",
)
ORDER = Param("order_by", "string", "ascending or descending", default="asc", enum=("asc", "desc"))

MODEL_ANSWER = obj(["model"], model=ref("Model"))
VERSION_ANSWER = obj(["model_version"], model_version=ref("ModelVersion"))
_LABELS = {**LABELS, "description": "all its labels (repeats dropped)"}
_NAME = NAME
_VERSION_NAME = {**STRING, "maxLength": NAME["maxLength"]}


def _owned(summary: str, response: dict, **kwargs: Any) -> Operation:
    """An operation only the model's owner or an admin may call (docs/team.md)."""
    return Operation(summary, response, owner=Owner.MODEL, **kwargs)


MODEL_ROUTES: tuple[Route, ...] = (
    Route(
        "/models",
        _models.ModelsHandler,
        {
            "get": Operation(
                "List the models of the registry",
                obj(["models"], models=array(ref("Model"))),
                reads=Listing("models", "model"),
                query=(
                    Param("id", "integer", "only the model with this id"),
                    Param("name", "string", "only names containing this (any case)"),
                    Param("description", "string", "only descriptions containing this"),
                    Param("labels", "csv", "only models with every one of these labels"),
                    Param("archived", "boolean", "only (un)archived models"),
                    Param(
                        "sort_by",
                        "string",
                        "the field to sort by",
                        default="name",
                        enum=tuple(MODEL_ORDERS),
                    ),
                    ORDER,
                ),
            ),
            "post": Operation(
                "Create a model",
                MODEL_ANSWER,
                status=201,
                request=obj(
                    ["name"],
                    name=_NAME,
                    description=DESCRIPTION,
                    notes=NOTES,
                    metadata=OBJECT,
                    labels=_LABELS,
                ),
                description="400 for a blank name, one with slashes or double spaces, or one "
                "of only digits; 409 when a model has the name in any case (as in Determined)",
            ),
        },
    ),
    Route(
        "/model/labels",
        _models.ModelLabelsHandler,
        {
            "get": Operation(
                "Every label some model has",
                obj(["labels"], labels=array(STRING)),
                reads=Listing("labels", "model_label"),
            )
        },
    ),
    Route(
        "/models/{model}",
        _models.ModelHandler,
        {
            "get": Operation("A model", MODEL_ANSWER),
            "patch": _owned(
                "Change a model's name, description, notes, metadata or labels (those given)",
                MODEL_ANSWER,
                request=obj(
                    name=_NAME,
                    description=DESCRIPTION,
                    notes=NOTES,
                    metadata=OBJECT,
                    labels=_LABELS,
                ),
                description="metadata and labels replace the old ones; 409 when the model "
                "is archived or the new name is taken",
            ),
            "delete": _owned("Delete a model and its versions (their checkpoints stay)", EMPTY),
        },
        (MODEL,),
    ),
    Route(
        "/models/{model}/versions",
        _models.ModelVersionsHandler,
        {
            "get": Operation(
                "The versions of a model, by version number",
                obj(["model_versions"], model_versions=array(ref("ModelVersion"))),
                query=(ORDER,),
            ),
            "post": _owned(
                "Register a checkpoint as the model's next version",
                VERSION_ANSWER,
                status=201,
                request={
                    **obj(
                        checkpoint_uuid=STRING,
                        checkpointUuid={**STRING, "description": "Determined's spelling"},
                        name=_VERSION_NAME,
                        comment=DESCRIPTION,
                        notes=NOTES,
                        metadata=OBJECT,
                        labels=_LABELS,
                    ),
                    "anyOf": [{"required": ["checkpoint_uuid"]}, {"required": ["checkpointUuid"]}],
                },
                description="404 for an unknown checkpoint; 409 when it is not COMPLETED or "
                "the model is archived. A registered checkpoint is never garbage-collected "
                "or deleted",
            ),
        },
        (MODEL,),
    ),
    Route(
        "/models/{model}/versions/{version}",
        _models.ModelVersionHandler,
        {
            "get": Operation("One version of a model, with its checkpoint", VERSION_ANSWER),
            "patch": _owned(
                "Change a version's name, comment, notes, metadata or labels (those given)",
                VERSION_ANSWER,
                request=obj(
                    name=_VERSION_NAME,
                    comment=DESCRIPTION,
                    notes=NOTES,
                    metadata=OBJECT,
                    labels=_LABELS,
                ),
                description="409 when the model is archived",
            ),
            "delete": _owned("Delete one version of a model (its checkpoint stays)", EMPTY),
        },
        (MODEL, VERSION),
    ),
    Route(
        "/models/{model}/{action}",
        _models.ModelActionHandler,
        {"post": _owned("Archive (read-only from then on) or unarchive a model", MODEL_ANSWER)},
        (MODEL, MODEL_ACTION),
    ),
)
