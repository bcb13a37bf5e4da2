"""Parsing config text (YAML or JSON) into a dict."""

from __future__ import annotations

import json
import os
from typing import Any

from determined.common.expconf._errors import InvalidConfig


def _yaml_loader() -> type:
    import yaml

    class ConfigLoader(yaml.SafeLoader):
        """SafeLoader that keeps dates as strings (a loaded config is always JSON-able) and
        rejects duplicate keys, which YAML would otherwise resolve silently to the last one."""

        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            seen: set = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:
                    continue  # unhashable key: SafeLoader reports it below
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
            return super().construct_mapping(node, deep=deep)

    ConfigLoader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return ConfigLoader


def parse_yaml_value(text: str) -> Any:
    """Parse one YAML scalar/flow value the way config files are parsed (used by overrides)."""
    import yaml

    return yaml.load(text, Loader=_yaml_loader())


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
    import yaml

    json_error: json.JSONDecodeError | None = None
    if text.lstrip().startswith(("{", "[")):
        # Probably JSON: parse it strictly first. YAML flow style also starts with a brace, so
        # fall back to YAML, but if both fail the JSON message is the one that fits the file.
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            json_error = e
    try:
        return yaml.load(text, Loader=_yaml_loader())
    except yaml.YAMLError as e:
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
