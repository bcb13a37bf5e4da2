"""The vocabulary of the route table: routes, their operations, parameters and trial scopes.

One `Operation` per (path, method) says everything the handler pipeline, the auth check and the
OpenAPI document need; `_routes.py` holds the table itself.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable
from typing import Any


class TrialScope(str, enum.Enum):
    """What a trial token may touch through one operation (None in a route = user token only)."""

    TRIAL = "trial"  # the path's {trial_id} is the token's trial
    ALLOCATION = "allocation"  # the path's {allocation_id} is the token's allocation
    EXPERIMENT = "experiment"  # the path's {experiment_id} is the token's experiment
    CHECKPOINT_READ = "checkpoint_read"  # a checkpoint of its experiment or its warm-start source
    CHECKPOINT_REPORT = "checkpoint_report"  # the body's trialId/allocationId are the token's
    CHECKPOINT_DELETE = "checkpoint_delete"  # every listed checkpoint belongs to its experiment


class Owner(str, enum.Enum):
    """Whose the object an operation acts on is, for the owner-or-admin rule (docs/team.md):
    a signed-in user other than its owner, and not an admin, gets a 403 before the handler
    runs (so before any state conflict), nothing changed. None in a route: any signed-in user.
    Trial tokens are not users: their `TrialScope` applies instead."""

    EXPERIMENT = "experiment"  # the path's {experiment_id}
    TRIAL = "trial"  # the path's {trial_id}: its experiment's owner
    CHECKPOINT = "checkpoint"  # the path's {uuid}: its experiment's owner
    CHECKPOINTS = "checkpoints"  # every body.checkpoints[].uuid: their experiments' owners
    MODEL = "model"  # the path's {model} (name or id)
    USER = "user"  # the path's {user_id} is the caller's own account
    WORKSPACE = "workspace"  # the path's {workspace_id}
    PROJECT = "project"  # the path's {project_id}
    TENSORBOARD = "tensorboard"  # the path's {tensorboard_id}: who launched it
    ALLOCATION = "allocation"  # the path's {allocation_id}: its trial's experiment's owner
    ADMIN = "admin"  # admins only


class Reads(str, enum.Enum):
    """What a GET shows, for the read rule (`MasterLite.read_access`, docs/team.md): a route
    that names an object in its path ({experiment_id}, {trial_id}, {uuid}, {model},
    {tensorboard_id}, {workspace_id}, {project_id}, {allocation_id}) is read-checked on that
    object without declaring anything; any other GET declares `reads`."""

    ANYONE = "anyone"  # nothing of one user's (master info, users, who you are)
    STREAM = "stream"  # the event stream: each event filtered to what the reader may read


@dataclasses.dataclass(frozen=True)
class Listing:
    """A GET whose answer lists users' objects: `answer[key]` holds objects of `kind`
    ("experiment", "model", "tensorboard", "workspace", "project", "model_label", "slot"),
    filtered to what the reader may read (api/_reads.py)."""

    key: str
    kind: str


@dataclasses.dataclass(frozen=True)
class Param:
    """A query parameter: parsed and checked before the handler runs (400 names it)."""

    name: str
    kind: str  # "integer" | "number" | "boolean" | "string" | "csv"
    description: str
    default: Any = None
    enum: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None


@dataclasses.dataclass(frozen=True)
class Operation:
    """One method of one route: everything the handler, the auth check and OpenAPI need."""

    summary: str
    response: dict  # JSON schema of the success body (OpenAPI flavour)
    status: int = 200
    trial_scope: TrialScope | None = None
    auth: bool = True
    query: tuple[Param, ...] = ()
    request: dict | None = None  # JSON schema of the body; validated before the handler runs
    # A cheap check that a body is plainly valid, for hot paths (metric ingestion): a body it
    # accepts skips the generic schema validator; anything else still gets that validator's
    # readable errors.
    fast_accept: Callable[[Any], bool] | None = None
    content_type: str = "application/json"
    # The largest body this operation reads (413 over it); None: the master's body limit,
    # which a context upload needs (master_lite._core._limits has the per-route limits).
    max_body_bytes: int | None = None
    description: str = ""
    # What a host's authorizer is asked for a logged-in user (jupyter_server's actions: "read",
    # "write", "execute"); None: "read" for GET, "write" for the other methods.
    auth_action: str | None = None
    # Who may call it (owner or admin, admin only); `verb` says what it does in the 403
    # ("kill": "... only alice or an admin may kill it"; default from the method, or the
    # path's {action}).
    owner: Owner | None = None
    verb: str = ""
    # Checks credentials of its own (a sign-in): a 401 for wrong ones, though it needs no token.
    signs_in: bool = False
    # What a GET shows a reader (Reads / Listing); None: the object its path names.
    reads: Reads | Listing | None = None

    def action_for(self, method: str) -> str:
        """The authorization action of this operation called with HTTP `method`."""
        if self.auth_action is not None:
            return self.auth_action
        return "read" if method.lower() in ("get", "head", "options") else "write"


@dataclasses.dataclass(frozen=True)
class PathParam:
    name: str
    regex: str
    schema: dict
    convert: Callable[[str], Any] = str
    description: str = ""


@dataclasses.dataclass(frozen=True)
class Route:
    path: str  # OpenAPI template below /api/v1, e.g. "/trials/{trial_id}/logs"
    handler: type
    operations: dict[str, Operation]  # lower-case method -> operation
    params: tuple[PathParam, ...] = ()

    def tornado_pattern(self) -> str:
        """The path as a tornado regex: literal parts escaped, each {param} a named group."""
        regexes = {param.name: param.regex for param in self.params}
        pattern = ""
        for literal, name in re.findall(r"([^{]*)(?:\{(\w+)\})?", self.path):
            pattern += re.escape(literal)
            if name:
                pattern += f"(?P<{name}>{regexes[name]})"
        return pattern


__all__ = ["Owner", "Reads", "Listing", "TrialScope", "Param", "Operation", "PathParam", "Route"]
