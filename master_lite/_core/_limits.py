"""Every input limit of the master, in one place (docs/rest-api.md, "Limits").

Each limit is checked before the work it protects (a parse, a store write, a copy) and a request
over one is answered 4xx naming the field and the limit, never 5xx. Why each value:

* Depth: no real config, metric report or metadata nests past a handful of levels; 64 leaves
  room and keeps every recursive step after parsing (schema validation, deepcopy, encoding)
  far below Python's recursion limit (1000).
* Integers: SQLite stores signed 64-bit integers; a bigger one would raise OverflowError there.
* Names: Determined sets no length; 1024 characters is more than any name a person or a
  generator writes (a UUID-laden name is ~100) and keeps the sidebar's list cheap.
* Labels: Determined stores them as text too; 1000 labels of 255 characters each is far beyond
  any tagging scheme.
* max_slots, slots_per_trial: Determined's protobuf fields are int32.
* Metadata: a model's or checkpoint's metadata is a handful of keys; 1 MiB of JSON is generous.
* Log lines: 64 KiB is a screenful of a progress dump; the runners already split captured
  lines at 8 KiB (master_lite.runners.MAX_LINE_BYTES), so this bounds what other ways in send.
* Events: a client of `/events` may fall 4 MiB (encoded) behind before it is dropped.
"""

from __future__ import annotations

import json
import math
from typing import Any

from determined.common.context import MAX_MEMBER_NAME_BYTES, MAX_MEMBER_PATH_BYTES

# --- request bodies ---------------------------------------------------------------------------
MAX_JSON_DEPTH = 64  # nesting of objects and arrays in a JSON body (the body itself is 1)
SQLITE_INT_MIN, SQLITE_INT_MAX = -(2**63), 2**63 - 1
MAX_LOG_POST_BYTES = 8 * 1024 * 1024  # POST /unmanaged/trials/{id}/logs

# --- fields -----------------------------------------------------------------------------------
MAX_NAME_CHARS = 1024  # experiment, model and model version names
MAX_DESCRIPTION_CHARS = 64 * 1024  # descriptions and comments
MAX_NOTES_CHARS = 1024 * 1024  # notes (markdown)
MAX_LABELS = 1000
MAX_LABEL_CHARS = 255
MAX_METADATA_BYTES = 1024 * 1024  # model, model version and checkpoint metadata, as JSON
MAX_SLOTS = 2**31 - 1  # resources.max_slots, resources.slots_per_trial (Determined: int32)
PRIORITY_RANGE = (1, 99)  # resources.priority (smaller first)

# --- logs and events --------------------------------------------------------------------------
MAX_LOG_LINE_BYTES = 64 * 1024
EVENT_QUEUE_BYTES = 4 * 1024 * 1024  # per /events client
EVENT_QUEUE_EVENTS = 10_000  # per /events client; past it the oldest are dropped

# Context members (determined.common.context checks them; named here so the table is whole).
CONTEXT_MEMBER_NAME_BYTES = MAX_MEMBER_NAME_BYTES
CONTEXT_MEMBER_PATH_BYTES = MAX_MEMBER_PATH_BYTES


def _path(parent: str, key: Any) -> str:
    return f"{parent}[{key}]" if isinstance(key, int) else f"{parent}.{key}"


def _out_of_range(value: Any) -> bool:
    return type(value) is int and not SQLITE_INT_MIN <= value <= SQLITE_INT_MAX


def body_within_limits(body: Any) -> bool:
    """True when no container in `body` is nested deeper than MAX_JSON_DEPTH and no integer
    is outside SQLite's 64 bits. Iterative (a body too deep cannot exhaust recursion), and
    cheap: it stacks containers only (a metrics batch costs about a third of its parse)."""
    kind = type(body)
    if kind is not dict and kind is not list:
        return not _out_of_range(body)
    stack: list[tuple[Any, int]] = [(body, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth = pop()
        if depth > MAX_JSON_DEPTH:
            return False
        for child in value.values() if type(value) is dict else value:
            kind = type(child)
            if kind is dict or kind is list:
                push((child, depth + 1))
            elif kind is int and not SQLITE_INT_MIN <= child <= SQLITE_INT_MAX:
                return False
    return True


def body_problem(body: Any, where: str = "body") -> str | None:
    """The first place in a parsed JSON body nested deeper than MAX_JSON_DEPTH or holding an
    integer SQLite cannot store, as "body.path: problem"; None when there is none (the usual
    body pays only `body_within_limits`; the path is searched for once one is over)."""
    if body_within_limits(body):
        return None
    stack: list[tuple[Any, str, int]] = [(body, where, 1)]
    while stack:
        value, path, depth = stack.pop()
        kind = type(value)
        if kind is dict or kind is list:
            if depth > MAX_JSON_DEPTH:
                return (
                    f"{path[:200]}: nested deeper than {MAX_JSON_DEPTH} levels of objects and "
                    "arrays (the limit of every request body)"
                )
            items = value.items() if kind is dict else enumerate(value)
            stack.extend((item, _path(path, key), depth + 1) for key, item in items)
        elif _out_of_range(value):
            shown = str(value) if value.bit_length() <= 256 else f"of {value.bit_length()} bits"
            return (
                f"{path[:200]}: the integer {shown} is out of range: integers must fit in 64 bits "
                f"({SQLITE_INT_MIN} to {SQLITE_INT_MAX}); send a larger number as a float"
            )
    return None


def text_problem(value: Any, path: str, limit: int) -> str | None:
    """`path: ...` when `value` is a string longer than `limit` characters."""
    if isinstance(value, str) and len(value) > limit:
        return f"{path}: {len(value)} characters, over the limit of {limit}"
    return None


def labels_problem(labels: Any, path: str = "labels") -> str | None:
    """Too many labels, or one too long; None when they are within the limits."""
    if not isinstance(labels, list):
        return None  # the schema says what a list of labels is
    if len(labels) > MAX_LABELS:
        return f"{path}: {len(labels)} labels, over the limit of {MAX_LABELS}"
    for index, label in enumerate(labels):
        problem = text_problem(label, f"{path}[{index}]", MAX_LABEL_CHARS)
        if problem:
            return problem
    return None


def metadata_problem(metadata: Any, path: str = "metadata") -> str | None:
    """Metadata whose JSON is over MAX_METADATA_BYTES; None otherwise."""
    if metadata is None:
        return None
    size = len(json.dumps(metadata, default=str).encode("utf-8", "surrogatepass"))
    if size > MAX_METADATA_BYTES:
        return f"{path}: {size} bytes of JSON, over the limit of {MAX_METADATA_BYTES}"
    return None


def resources_problems(resources: Any, path: str = "resources") -> list[str]:
    """`max_slots`, `slots_per_trial` and `priority` outside their ranges, `weight` not finite."""
    if not isinstance(resources, dict):
        return []
    problems = []
    for key in ("max_slots", "slots_per_trial"):
        value = resources.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SLOTS:
            problems.append(f"{path}.{key}: {value} is over the limit of {MAX_SLOTS}")
    priority = resources.get("priority")
    low, high = PRIORITY_RANGE
    if isinstance(priority, int) and not isinstance(priority, bool) and not low <= priority <= high:
        problems.append(f"{path}.priority: must be between {low} and {high}, got {priority}")
    weight = resources.get("weight")
    if isinstance(weight, float) and not math.isfinite(weight):
        problems.append(f"{path}.weight: must be a finite number, got {weight!r}")
    return problems


def config_problems(config: dict) -> list[str]:
    """What of an experiment config is over the limits: its name, description, labels and
    scheduling resources (the config schema checks types; this checks sizes)."""
    problems = [
        problem
        for problem in (
            text_problem(config.get("name"), "name", MAX_NAME_CHARS),
            text_problem(config.get("description"), "description", MAX_DESCRIPTION_CHARS),
            labels_problem(config.get("labels")),
        )
        if problem
    ]
    return problems + resources_problems(config.get("resources"))


def capped_line(line: str) -> str:
    """`line`, or its first MAX_LOG_LINE_BYTES bytes and a visible marker saying how much was cut."""
    if len(line) * 4 <= MAX_LOG_LINE_BYTES:  # cheap: no encoding for the usual short line
        return line
    data = line.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_LOG_LINE_BYTES:
        return line
    kept = data[:MAX_LOG_LINE_BYTES].decode("utf-8", "ignore")  # never half a character
    return (
        f"{kept} [line truncated: {len(data)} bytes, over the {MAX_LOG_LINE_BYTES}-byte limit "
        "of a log line]"
    )


__all__ = [
    "CONTEXT_MEMBER_NAME_BYTES",
    "CONTEXT_MEMBER_PATH_BYTES",
    "EVENT_QUEUE_BYTES",
    "EVENT_QUEUE_EVENTS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_LABELS",
    "MAX_LABEL_CHARS",
    "MAX_LOG_LINE_BYTES",
    "MAX_LOG_POST_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_NAME_CHARS",
    "MAX_NOTES_CHARS",
    "MAX_SLOTS",
    "PRIORITY_RANGE",
    "SQLITE_INT_MAX",
    "SQLITE_INT_MIN",
    "body_problem",
    "body_within_limits",
    "capped_line",
    "config_problems",
    "labels_problem",
    "metadata_problem",
    "resources_problems",
    "text_problem",
]
