"""The read rule, as the route table declares it (`Operation.reads`; docs/team.md, "Who may
read").

With `MasterLite.read_access = "own"` a signed-in user who is not an admin reads only what they
own. The handler pipeline applies it from the route table, so no handler carries code of its
own for it:

* a GET whose path names an object ({experiment_id}, {trial_id}, {allocation_id}, {uuid},
  {model}, {tensorboard_id}, {workspace_id}, {project_id}) is checked on that object right
  after authentication: another user's object answers 404, exactly as one that does not exist;
* a GET that lists objects declares `Listing(key, kind)`: `answer[key]` is filtered to what the
  reader may read before it is encoded;
* the event stream (`Reads.STREAM`) sends only events of objects the reader may read;
* `Reads.ANYONE`: nothing of one user's (what the master is, the users, who you are).

A GET that declares none of these and names no object is refused to a narrowed reader (403),
so a route added without a rule shows nothing (tests/reliability/test_read_access.py walks the
table).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from master_lite import errors
from master_lite.api._declarations import Listing, Operation, Reads, Route
from master_lite.api._parsing import ApiError
from master_lite.users import check_may_read, may_read, restricted_reader

# Path parameter -> the kind of object it names (first match in this order).
PATH_KINDS: tuple[tuple[str, str], ...] = (
    ("experiment_id", "experiment"),
    ("trial_id", "trial"),
    ("allocation_id", "allocation"),
    ("uuid", "checkpoint"),
    ("model", "model"),
    ("tensorboard_id", "tensorboard"),
    ("workspace_id", "workspace"),
    ("project_id", "project"),
)
# A slot held by a run the reader may not read: shown as held, not by what.
HIDDEN_HOLDER = "(another user's)"


def reader_of(master: Any, principal: Any) -> Any:
    """The principal whose reads are narrowed (None: they read everything)."""
    return restricted_reader(master.users.read_access, principal)


def path_object(route: Route) -> str | None:
    """The path parameter a GET of `route` is read-checked on (None: it names no object)."""
    names = {param.name for param in route.params}
    for name, _kind in PATH_KINDS:
        if name in names:
            return name
    return None


def check_path_reader(
    master: Any,
    principal: Any,
    route: Route,
    operation: Operation,
    path_kwargs: dict[str, Any],
) -> None:
    """NotFound when a narrowed reader GETs (`operation`) an object that is not theirs, or
    makes something in it (a project in a workspace: an operation with no owner rule; acting
    on another's object is the owner rule's 403)."""
    is_get = route.operations.get("get") is operation
    if not is_get and operation.owner is not None:
        return
    reader = reader_of(master, principal)
    if reader is None or isinstance(operation.reads, Reads):
        return
    name = path_object(route)
    if name is None:
        if isinstance(operation.reads, Listing) or not is_get:
            return
        raise ApiError(
            403,
            f"GET {route.path} declares no read rule (Operation.reads), so with read_access "
            "'own' only an admin may call it; ask an admin",
        )
    kind = dict(PATH_KINDS)[name]
    check_may_read(master.users, reader, kind, path_kwargs[name])


def check_readable(master: Any, principal: Any, kind: str, keys: Any) -> None:
    """NotFound unless a narrowed reader may read each object a body names (what a new
    TensorBoard shows, the checkpoint a model version registers): a write that would hand
    them another's object to read. Keys of the wrong type are left to the handler's 400."""
    reader = reader_of(master, principal)
    if reader is None:
        return
    numbered = kind in ("experiment", "trial", "workspace", "project")
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, int if numbered else (int, str)):
            continue
        check_may_read(master.users, reader, kind, key)


def readable_answer(master: Any, principal: Any, operation: Operation | None, payload: Any) -> Any:
    """`payload` with a `Listing`'s objects narrowed to what the reader may read."""
    listing = operation.reads if operation is not None else None
    if not isinstance(listing, Listing) or not isinstance(payload, dict):
        return payload
    reader = reader_of(master, principal)
    if reader is None or listing.key not in payload:
        return payload
    items = payload[listing.key]
    if listing.kind == "model_label":
        kept: list[Any] = _labels_of_readable_models(master, reader)
    elif listing.kind == "slot":
        kept = [_slot_for(master, reader, slot) for slot in items]
    else:
        kept = [
            item
            for item in items
            if may_read(reader, listing.kind, item.get("userId"), item.get("id"))
        ]
    answer = {**payload, listing.key: kept}
    if isinstance(answer.get("pagination"), dict):
        answer["pagination"] = {**answer["pagination"], "limit": len(kept), "total": len(kept)}
    return answer


def _labels_of_readable_models(master: Any, reader: Any) -> list[str]:
    labels = {
        label
        for model in master.models.list_models()
        if may_read(reader, "model", model.get("userId"))
        for label in model.get("labels") or []
    }
    return sorted(labels)


def _slot_for(master: Any, reader: Any, slot: dict) -> dict:
    trial_id = slot.get("trial_id")
    if trial_id is None:
        return slot
    try:
        owner_id = master.users.owner_of("trial", trial_id)
    except errors.NotFound:
        owner_id = None
    if may_read(reader, "trial", owner_id):
        return slot
    return {**slot, "allocation_id": HIDDEN_HOLDER, "trial_id": None}


def event_filter(master: Any, principal: Any) -> Callable[[str, dict], bool] | None:
    """Which events a reader's stream may send (None: all of them). An event is about an
    experiment (its own, or a trial's, metric's, log's or checkpoint's `experiment_id`) or a
    model; owners never change, so each owner found is remembered for the stream's life."""
    reader = reader_of(master, principal)
    if reader is None:
        return None
    owners: dict[tuple[str, Any], int] = {}

    def owned(kind: str, key: Any) -> bool:
        if key is None:
            return False
        if (kind, key) not in owners:
            try:
                owners[(kind, key)] = master.users.owner_of(kind, key)
            except errors.NotFound:
                return False  # gone (a deleted model): nobody's to show
        return owners[(kind, key)] == reader.user_id

    def visible(event_type: str, payload: dict) -> bool:
        if event_type in ("experiment", "model"):
            if "userId" in payload:
                owners[(event_type, payload.get("id"))] = payload["userId"]
            return owned(event_type, payload.get("id"))
        return owned("experiment", payload.get("experiment_id"))

    return visible


__all__ = [
    "HIDDEN_HOLDER",
    "PATH_KINDS",
    "check_path_reader",
    "check_readable",
    "event_filter",
    "path_object",
    "readable_answer",
    "reader_of",
]
