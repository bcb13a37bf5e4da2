"""Parsing config text (YAML or JSON) into a dict."""

from __future__ import annotations

import json
import os
from typing import Any

from determined.common.expconf._errors import InvalidConfig


def _yaml() -> Any:
    """A YAML 1.2 safe parser, as Determined's CLI reads configs (ruamel.yaml, typ="safe").

    YAML 1.2 is what Determined's configs are written for: ``1e-3`` is a float (YAML 1.1, as
    PyYAML reads it, makes it a string and a trial dies casting it), ``yes``/``no``/``on``/``off``
    are strings, ``0o17`` is octal. Two departures keep a loaded config JSON-able and unambiguous:
    dates stay strings, and a duplicate key is an error naming it. A new parser per call: ruamel's
    parser objects are not safe to share between threads (the master parses off its loop).
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import ConstructorError, SafeConstructor

    class ConfigConstructor(SafeConstructor):
        def check_mapping_key(
            self, node: Any, key_node: Any, mapping: Any, key: Any, value: Any
        ) -> bool:
            if key in mapping:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            return True

        def construct_date_as_text(self, node: Any) -> Any:
            return self.construct_scalar(node)

    ConfigConstructor.add_constructor(
        "tag:yaml.org,2002:timestamp", ConfigConstructor.construct_date_as_text
    )
    parser = YAML(typ="safe", pure=True)
    parser.Constructor = ConfigConstructor
    return parser


def parse_yaml_value(text: str) -> Any:
    """Parse one YAML scalar/flow value the way config files are parsed (used by overrides)."""
    return _yaml().load(text)


def load(text: str, source: str = "<config>") -> dict:
    """Parse an experiment config written in YAML or JSON.

    Raises InvalidConfig naming ``source`` (and the line and column for a syntax error) when the
    text is not a well-formed document or its top level is not a mapping.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    config = _parse(text, source)
    if config is None:
        raise InvalidConfig(
            f"{source}: the config is empty (expected a mapping such as 'name: my-exp')"
        )
    if not isinstance(config, dict):
        raise InvalidConfig(
            f"{source}: the config must be a mapping of field names to values at the top level,"
            f" not a {_kind(config)}"
        )
    return config


def load_file(path: str | os.PathLike) -> dict:
    """Read and parse a config file; a missing or unreadable file raises InvalidConfig naming it."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise InvalidConfig(f"{name}: config file not found") from None
    except IsADirectoryError:
        raise InvalidConfig(f"{name}: is a directory, not a config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidConfig(f"{name}: cannot read config file ({e})") from None
    return load(text, source=name)


def _parse(text: str, source: str) -> Any:
    from ruamel.yaml.error import YAMLError

    json_error: json.JSONDecodeError | None = None
    if text.lstrip().startswith(("{", "[")):
        # Probably JSON: parse it strictly first. YAML flow style also starts with a brace, so
        # fall back to YAML, but if both fail the JSON message is the one that fits the file.
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            json_error = e
    try:
        return _yaml().load(text)
    except YAMLError as e:
        if json_error is not None:
            where = f"line {json_error.lineno}, column {json_error.colno}"
            raise InvalidConfig(f"{source}: {where}: {json_error.msg}") from None
        raise InvalidConfig(f"{source}: {_describe_yaml_error(e)}") from None


def _describe_yaml_error(error: Any) -> str:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or getattr(error, "context", None)
    if mark is None:
        return f"invalid YAML ({error})"
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem or 'invalid YAML'}"


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return type(value).__name__
