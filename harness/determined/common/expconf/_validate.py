"""Validation: every problem in a config, each as ``"dotted.path: message"``.

Two passes: jsonschema checks structure against `_schema.SCHEMA` (its raw errors are rewritten
into messages that say what to write instead), then `_semantic_errors` checks what reads across
fields. jsonschema is imported on first use only, to keep `import determined` fast.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeGuard

from determined.common.expconf import _schema
from determined.common.expconf._errors import InvalidConfig
from determined.common.expconf._hparams import hparam_leaves

LEGACY_SEARCHERS = {
    "adaptive": "adaptive_asha",
    "adaptive_simple": "adaptive_asha",
    "sync_halving": "adaptive_asha (or async_halving)",
    "pbt": "adaptive_asha",
}
UNSUPPORTED_STORAGE_TYPES = ("azure",)
SUPPORTED_STORAGE_TYPES = ("shared_fs", "directory", "s3", "gcs")

_validator_instance: Any = None


def validate(config: dict) -> list[str]:
    """Every error in ``config``, sorted, each ``"dotted.path: message"``; [] when it is valid.

    Accepts both a user's config and an expanded one (the output of apply_defaults).
    """
    if not isinstance(config, dict):
        return [
            f"<config>: the config must be a mapping of field names to values, not {_describe(config)}"
        ]
    errors = list(_non_string_keys(config, ()))
    if errors:
        # jsonschema cannot match patterns against non-string keys; check the rest as strings.
        config = json.loads(json.dumps(config, default=str))
    errors += _schema_errors(config)
    errors += _semantic_errors(config)
    return sorted(set(errors))


def check(config: dict) -> None:
    """Raise InvalidConfig listing every error, if there is any."""
    errors = validate(config)
    if errors:
        raise InvalidConfig(errors)


# ---------------------------------------------------------------------------------------------
# structural errors from jsonschema


def import_jsonschema() -> Any:
    """The jsonschema module, imported without the grammar its optional format checkers build.

    jsonschema's format checkers import rfc3987_syntax, which compiles lark grammars at import
    (1-5 s of CPU here). Neither the config schema nor the API's request schemas use `format`,
    so a process that has not loaded jsonschema yet (the CLI, a trial, a standalone master)
    keeps that module out; where something else loaded jsonschema first, nothing changes.
    """
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import jsonschema

    return jsonschema


def prepare_validator() -> None:
    """Import jsonschema and build the config validator now (a master calls this in a thread at
    start), so that the first request to validate a config does not pay for it."""
    _validator()


def _validator() -> Any:
    global _validator_instance
    if _validator_instance is None:
        _validator_instance = import_jsonschema().Draft202012Validator(_schema.SCHEMA)
    return _validator_instance


def _schema_errors(config: dict) -> list[str]:
    errors: list[str] = []
    for error in _validator().iter_errors(config):
        errors.extend(_translate(error))
    return errors


def _translate(error: Any) -> list[str]:
    path = list(error.absolute_path)
    keyword = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    instance = error.instance

    if keyword == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        return [
            f"{_format_path([*path, key])}: unknown key {key!r}{_did_you_mean(key, allowed)}"
            for key in instance
            if key not in allowed
        ]
    if keyword == "required":
        hints = schema.get("x-required-hints", {})
        return [
            f"{_format_path([*path, key])}: {hints.get(key, 'required')}"
            for key in error.validator_value
            if key not in instance
        ]

    where = _format_path(path)
    if keyword == "type":
        expected = error.validator_value
        expected = [expected] if isinstance(expected, str) else expected
        names = [_TYPE_NAMES.get(kind, kind) for kind in expected if kind != "null"]
        if "null" in expected:
            names.append("null")
        return [f"{where}: expected {' or '.join(names)}, got {_describe(instance)}"]
    if keyword == "enum":
        options = [option for option in error.validator_value if option is not None]
        listed = ", ".join(str(option) for option in options)
        hint = _did_you_mean(instance, options) if isinstance(instance, str) else ""
        what = schema.get("x-what")
        if what:
            return [f"{where}: unknown {what} {_show(instance)} (expected one of {listed}){hint}"]
        return [f"{where}: must be one of {listed} (got {_show(instance)}){hint}"]
    if keyword in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        side = "minimum" if "inimum" in keyword else "maximum"
        bound_hint = schema.get(f"x-{side}-hint")
        if bound_hint is None:
            operator = {
                "minimum": ">=",
                "exclusiveMinimum": ">",
                "maximum": "<=",
                "exclusiveMaximum": "<",
            }
            bound_hint = f"must be {operator[keyword]} {error.validator_value}"
        return [f"{where}: {bound_hint} (got {_show(instance)})"]
    if keyword == "pattern":
        hint = schema.get("x-pattern-hint", f"must match {error.validator_value!r}")
        return [f"{where}: {hint} (got {_show(instance)})"]
    if keyword == "minItems":
        hint = schema.get("x-min-items-hint", f"must have at least {error.validator_value} item(s)")
        return [f"{where}: {hint}"]
    if keyword == "minLength":
        return [f"{where}: must not be empty"]
    if keyword in ("minProperties", "maxProperties") and schema.get("x-kind") == "length":
        got = ", ".join(sorted(instance)) or "nothing"
        return [
            f"{where}: a length needs exactly one of batches, records or epochs"
            f" (e.g. {{batches: 100}}), got {got}"
        ]
    if keyword == "not":
        return [f"{where}: {schema.get('x-not-hint', error.message)}"]
    return [f"{where}: {error.message}"]


_TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "a mapping",
    "boolean": "true or false",
}


# ---------------------------------------------------------------------------------------------
# semantic errors: what reads across fields


def _semantic_errors(config: dict) -> Iterator[str]:
    searcher = config.get("searcher")
    if isinstance(searcher, dict):
        yield from _searcher_errors(searcher, config.get("hyperparameters"))
    hparams = config.get("hyperparameters")
    if isinstance(hparams, dict):
        yield from _range_errors(hparams)
    storage = config.get("checkpoint_storage")
    if isinstance(storage, dict):
        yield from _storage_errors(storage)
    yield from _workspace_errors(config)
    profiling = config.get("profiling")
    if isinstance(profiling, dict):
        begin, end = profiling.get("begin_on_batch", 0), profiling.get("end_after_batch")
        if _is_number(begin) and _is_number(end) and end < begin:
            yield (
                f"profiling.end_after_batch: must be >= profiling.begin_on_batch"
                f" (got {end} < {begin})"
            )


def _searcher_errors(searcher: dict, hparams: Any) -> Iterator[str]:
    name = searcher.get("name")
    if not isinstance(name, str):
        return  # missing or mistyped: reported by the schema
    if name == "custom":
        yield (
            "searcher.name: 'custom' searchers are not supported (Determined 0.38 removed them);"
            " use one of " + ", ".join(_schema.SEARCHER_NAMES)
        )
        return
    if name in LEGACY_SEARCHERS:
        yield (
            f"searcher.name: '{name}' is a legacy searcher that Determined no longer runs;"
            f" use {LEGACY_SEARCHERS[name]} instead"
        )
        return
    if name not in _schema.SEARCHER_NAMES:
        yield (
            f"searcher.name: unknown searcher {name!r} (expected one of"
            f" {', '.join(_schema.SEARCHER_NAMES)}){_did_you_mean(name, _schema.SEARCHER_NAMES)}"
        )
        return

    if name in ("adaptive_asha", "async_halving"):
        yield from _asha_length_errors(name, searcher)
    if name == "grid" and isinstance(hparams, dict):
        for path, spec in hparam_leaves(hparams):
            if spec.get("type") in ("int", "double", "log") and "count" not in spec:
                yield (
                    f"{_format_path(['hyperparameters', *path, 'count'])}: required when"
                    f" searcher.name is 'grid' (the number of points on this axis, e.g. count: 4)"
                )


def _asha_length_errors(name: str, searcher: dict) -> Iterator[str]:
    # 0.38 wants time_metric + max_time; <=0.37 configs give max_length instead. Either works.
    has_time_metric = searcher.get("time_metric") is not None
    has_max_time = searcher.get("max_time") is not None
    if has_time_metric and not has_max_time:
        yield (
            "searcher.max_time: required together with searcher.time_metric"
            " (the time_metric value at which a trial is done, e.g. max_time: 100)"
        )
    elif has_max_time and not has_time_metric:
        yield (
            "searcher.time_metric: required together with searcher.max_time"
            " (the validation metric that measures training time, e.g. time_metric: batches)"
        )
    elif not has_time_metric and searcher.get("max_length") is None:
        yield (
            f"searcher: {name} needs time_metric and max_time"
            f" (e.g. time_metric: batches, max_time: 100), or max_length in the older form"
            f" (e.g. max_length: {{batches: 100}})"
        )


def _range_errors(hparams: dict) -> Iterator[str]:
    for path, spec in hparam_leaves(hparams):
        if spec.get("type") not in ("int", "double", "log"):
            continue
        low, high = spec.get("minval"), spec.get("maxval")
        if _is_number(low) and _is_number(high) and not low < high:
            yield (
                f"{_format_path(['hyperparameters', *path])}: minval must be less than maxval"
                f" (got minval {low}, maxval {high})"
            )


def _storage_errors(storage: dict) -> Iterator[str]:
    kind = storage.get("type")
    if not isinstance(kind, str):
        return
    if kind in UNSUPPORTED_STORAGE_TYPES:
        yield (
            f"checkpoint_storage.type: {kind!r} is not supported by master_lite: use s3 (any "
            f"S3-compatible store, through endpoint_url), gcs (Google Cloud Storage), "
            f"shared_fs or directory"
        )
    elif kind == "s3":
        from determined.common.storage import s3_config_problems

        yield from s3_config_problems(storage)
    elif kind == "gcs":
        from determined.common.storage import gcs_config_problems

        yield from gcs_config_problems(storage)
    elif kind not in SUPPORTED_STORAGE_TYPES:
        yield (
            f"checkpoint_storage.type: unknown checkpoint storage type {kind!r}"
            f" (expected shared_fs, directory, s3 or gcs)"
            f"{_did_you_mean(kind, _schema.CHECKPOINT_STORAGE_TYPES)}"
        )


def _workspace_errors(config: dict) -> Iterator[str]:
    workspace, project = config.get("workspace"), config.get("project")
    if workspace and not project:
        yield "project: required when workspace is set (give both or neither)"
    elif project and not workspace:
        yield "workspace: required when project is set (give both or neither)"


# ---------------------------------------------------------------------------------------------
# formatting helpers


def _non_string_keys(value: Any, path: tuple) -> Iterator[str]:
    if isinstance(value, dict):
        for key, child in value.items():
            if not isinstance(key, str):
                yield (
                    f"{_format_path([*path, str(key)])}: keys must be strings, got {_describe(key)}"
                    f' (quote it in YAML, e.g. "{key}")'
                )
            yield from _non_string_keys(child, (*path, str(key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _non_string_keys(child, (*path, index))


def _format_path(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "<config>"


def _did_you_mean(word: Any, options: Iterable[Any]) -> str:
    candidates = [option for option in options if isinstance(option, str)]
    matches = difflib.get_close_matches(str(word), candidates, n=1, cutoff=0.6)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
