"""Parsing requests and encoding answers: body size, JSON, schema validation, query values,
and the `ApiError` a handler raises for any answer other than success.

Pure functions of their inputs (no handler state); `_base.py` applies them to a request.
"""

from __future__ import annotations

import base64
from typing import Any

from determined.common import expconf
from master_lite._core._limits import SQLITE_INT_MAX, SQLITE_INT_MIN
from master_lite._core._serialize import json_default as json_default  # re-exported
from master_lite.api._declarations import Param

# Users send contexts base64-encoded inside JSON: 4 bytes per 3, plus room for the config.
BODY_OVERHEAD_BYTES = 1024 * 1024


def max_body_bytes(context_size_limit: int) -> int:
    """Largest request body the API reads for a context of `context_size_limit` bytes."""
    return (context_size_limit + 2) // 3 * 4 + BODY_OVERHEAD_BYTES


class ApiError(Exception):
    """An answer other than success, decided by the HTTP layer itself (auth, parsing)."""

    def __init__(self, status: int, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = list(errors or [])


# ---------------------------------------------------------------------------------------------


def _schema_path(path: Any) -> str:
    text = "body"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def unstorable_text(body: Any, path: str = "body") -> str | None:
    """The first place in a JSON body holding text that UTF-8 (SQLite's TEXT) cannot encode:
    JSON lets a client send a lone UTF-16 surrogate ("\\ud800"); None when there is none.
    Only asked once a store write failed on it, so that the usual request pays nothing."""
    if isinstance(body, str):
        try:
            body.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{path}: text with an unpaired surrogate ({body[exc.start]!r}) cannot be stored"
        return None
    if isinstance(body, dict):
        for key, value in body.items():
            found = unstorable_text(key, f"{path} (a key)") or unstorable_text(
                value, f"{path}.{key}"
            )
            if found:
                return found
    if isinstance(body, list):
        for index, item in enumerate(body):
            found = unstorable_text(item, f"{path}[{index}]")
            if found:
                return found
    return None


def openapi_to_jsonschema(schema: Any) -> Any:
    """OpenAPI 3.0's `nullable: true` as JSON Schema (which the validator understands)."""
    if isinstance(schema, list):
        return [openapi_to_jsonschema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {
        key: openapi_to_jsonschema(value) for key, value in schema.items() if key != "nullable"
    }
    if schema.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


_validators: dict[int, Any] = {}
MAX_ERROR_LINE = 300


def error_line(error: Any) -> str:
    """One "body.path: message" line; for oneOf/anyOf, the deepest failure inside (it lies in
    the alternative the client meant: a batch with one bad report fails deep in `reports`)."""
    while error.context:
        error = max(error.context, key=lambda inner: len(inner.absolute_path))
    line = f"{_schema_path(error.absolute_path)}: {_limit_message(error) or error.message}"
    # Messages quote the offending value, which may be a whole metrics batch.
    return line if len(line) <= MAX_ERROR_LINE else line[: MAX_ERROR_LINE - 3] + "..."


def _limit_message(error: Any) -> str | None:
    """A size limit's failure as "N characters, over the limit of M" (the validator's own
    message quotes the whole value and names no limit); None for other failures."""
    limit, instance = error.validator_value, error.instance
    if error.validator == "maxLength":
        return f"{len(instance)} characters, over the limit of {limit} (docs/rest-api.md, Limits)"
    if error.validator == "maxItems":
        return f"{len(instance)} items, over the limit of {limit} (docs/rest-api.md, Limits)"
    if error.validator == "maximum":
        return f"{instance} is over the limit of {limit} (docs/rest-api.md, Limits)"
    return None


def request_validator(schema: dict) -> Any:
    """A cached validator of a route's request schema (schemas live as long as the routes)."""
    validator = _validators.get(id(schema))
    if validator is None:
        jsonschema = expconf.import_jsonschema()  # the master imports it at start, in a thread
        validator = jsonschema.Draft7Validator(openapi_to_jsonschema(schema))
        _validators[id(schema)] = validator
    return validator


def parse_query_value(param: Param, raw: str) -> Any:
    """The query parameter `param` from its raw text: converted to its kind and checked against
    its enum and bounds.

    Raises:
        ApiError: 400, naming the parameter and what is wrong with `raw`.
    """
    where = f"query parameter {param.name}"
    if param.kind == "integer":
        try:
            value: Any = int(raw)
        except ValueError:
            raise ApiError(400, f"{where}: expected an integer, got {raw!r}") from None
        if not SQLITE_INT_MIN <= value <= SQLITE_INT_MAX:  # else SQLite raises OverflowError
            raise ApiError(400, f"{where}: {raw} is out of range (64-bit integers only)")
    elif param.kind == "number":
        try:
            value = float(raw)
        except ValueError:
            raise ApiError(400, f"{where}: expected a number, got {raw!r}") from None
    elif param.kind == "boolean":
        lowered = raw.lower()
        if lowered not in ("true", "false", "1", "0"):
            raise ApiError(400, f"{where}: expected true or false, got {raw!r}")
        value = lowered in ("true", "1")
    elif param.kind == "csv":
        value = [item.strip() for item in raw.split(",") if item.strip()]
        if param.enum is not None:
            unknown = [item for item in value if item not in param.enum]
            if unknown:
                raise ApiError(
                    400,
                    f"{where}: unknown value(s) {', '.join(unknown)}; "
                    f"choose from {', '.join(param.enum)}",
                )
        return value
    else:
        value = raw
    if param.enum is not None and value not in param.enum:
        raise ApiError(400, f"{where}: {raw!r} is not one of {', '.join(param.enum)}")
    if param.minimum is not None and value < param.minimum:
        raise ApiError(400, f"{where}: {raw} is below the minimum {param.minimum:g}")
    if param.maximum is not None and value > param.maximum:
        raise ApiError(400, f"{where}: {raw} is above the maximum {param.maximum:g}")
    return value


def checkpoint_trial_id(body: dict) -> int | None:
    """The trial a checkpoint report names: `trialId`, or Determined's `taskId` "trial-<id>"."""
    if body.get("trialId") is not None:
        return int(body["trialId"])
    task_id = str(body.get("taskId") or "")
    if task_id.startswith("trial-") and task_id[len("trial-") :].isdigit():
        return int(task_id[len("trial-") :])
    return None


def decode_base64(value: str, field: str) -> bytes:
    """The bytes of a base64 body field (a context); a 400 naming `field` when it is not base64."""
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, TypeError):
        raise ApiError(
            400,
            f"{field}: not valid base64 (send the tar.gz bytes base64-encoded)",
            [f"{field}: not valid base64"],
        ) from None


def unauthorized(*, token_given: bool, hub: Any = None) -> ApiError:
    """The 401 for a caller the master cannot identify (`hub`: the master's HubIdentity when
    it runs as a JupyterHub service; its message names the Hub)."""
    if hub is not None:
        return ApiError(401, hub.unauthorized(token_given=token_given))
    if token_given:
        return ApiError(
            401,
            "missing or invalid token: the token given is not the master's "
            "token nor a live trial's session token",
        )
    return ApiError(
        401,
        "missing or invalid token: send 'Authorization: Bearer <token>' "
        "(the token is in <root_dir>/master.json)",
    )
