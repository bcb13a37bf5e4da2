"""The building blocks of the experiment config's JSON schema, shared by its sections."""

from __future__ import annotations

from typing import Any

STRING = {"type": "string"}
BOOL = {"type": "boolean"}
NON_NEGATIVE_INT = {"type": "integer", "minimum": 0}
POSITIVE_INT = {"type": "integer", "minimum": 1}
STRING_LIST = {"type": "array", "items": {"type": "string"}}
ANY_OBJECT_OR_NULL = {"type": ["object", "null"]}
ABSOLUTE_PATH = {
    "type": "string",
    "pattern": "^/",
    "x-pattern-hint": "must be an absolute path (starting with '/')",
}


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An object schema allowing only `properties` (more keywords in `extra`)."""
    return {"type": "object", "properties": properties, "additionalProperties": False, **extra}
