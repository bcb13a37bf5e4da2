"""The building blocks of the API's JSON schemas (the route table's and the OpenAPI
document's): types, helpers, and the state names."""

from __future__ import annotations

from typing import Any


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: dict) -> dict:
    if "$ref" in schema:  # OpenAPI 3.0 ignores siblings of $ref
        return {"allOf": [schema], "nullable": True}
    return {**schema, "nullable": True}


def obj(required: tuple[str, ...] | list[str] = (), **properties: dict) -> dict:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def array(items: dict) -> dict:
    return {"type": "array", "items": items}


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
NUMBER = {"type": "number"}
# A number that may be non-finite: strict JSON answers NaN and ±Infinity as these strings, as
# Determined's API does (docs/rest-api.md, "Non-finite numbers").
NUMBER_OR_NON_FINITE = {
    "oneOf": [NUMBER, {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]}],
    "description": 'a number; NaN and infinities as the strings "NaN", "Infinity", "-Infinity"',
}
BOOLEAN = {"type": "boolean"}
OBJECT = {"type": "object"}
TIME = {"type": "string", "format": "date-time"}
EMPTY = obj()

EXPERIMENT_STATES = [
    "ACTIVE",
    "PAUSED",
    "STOPPING_CANCELED",
    "STOPPING_COMPLETED",
    "STOPPING_ERROR",
    "COMPLETED",
    "CANCELED",
    "ERROR",
]
TRIAL_STATES = [
    "ACTIVE",
    "PAUSED",
    "STOPPING_CANCELED",
    "STOPPING_KILLED",
    "STOPPING_COMPLETED",
    "STOPPING_ERROR",
    "COMPLETED",
    "CANCELED",
    "ERROR",
]


__all__ = [
    "BOOLEAN",
    "EMPTY",
    "EXPERIMENT_STATES",
    "INTEGER",
    "NUMBER",
    "NUMBER_OR_NON_FINITE",
    "OBJECT",
    "STRING",
    "TIME",
    "TRIAL_STATES",
    "array",
    "nullable",
    "obj",
    "ref",
]
