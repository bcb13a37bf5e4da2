"""The owner-or-admin rule, as the route table declares it (`Operation.owner`).

Run by the handler pipeline after authentication and before the handler: a signed-in user
acting on what another user owns gets a 403 naming the owner, before any state check and with
nothing changed. The Users part knows who owns what (`master.users.check_may_act`).
"""

from __future__ import annotations

from typing import Any

from master_lite._core._auth import OWNER_ID, TrialPrincipal, UserPrincipal
from master_lite.api._declarations import Operation, Owner

_METHOD_VERBS = {"post": "change", "patch": "edit", "put": "change", "delete": "delete"}
_PATH_KEYS = {
    Owner.EXPERIMENT: "experiment_id",
    Owner.TRIAL: "trial_id",
    Owner.CHECKPOINT: "uuid",
    Owner.MODEL: "model",
    Owner.USER: "user_id",
    Owner.WORKSPACE: "workspace_id",
    Owner.PROJECT: "project_id",
    Owner.TENSORBOARD: "tensorboard_id",
    Owner.ALLOCATION: "allocation_id",
}


def _verb(operation: Operation, method: str, path_kwargs: dict[str, Any]) -> str:
    if operation.verb:
        return operation.verb
    if "action" in path_kwargs:
        return str(path_kwargs["action"])
    return _METHOD_VERBS.get(method, "use")


def check_path_owner(
    master: Any, principal: Any, operation: Operation, method: str, path_kwargs: dict[str, Any]
) -> None:
    """The rule for an object the path names (or admin only); Forbidden/NotFound raised."""
    owner = operation.owner
    if owner is None or owner is Owner.CHECKPOINTS or not isinstance(principal, UserPrincipal):
        return
    verb = _verb(operation, method, path_kwargs)
    if owner is Owner.ADMIN:
        master.users.check_may_act(principal, "admin", None, verb)
        return
    master.users.check_may_act(principal, owner.value, path_kwargs[_PATH_KEYS[owner]], verb)


def check_body_owner(master: Any, principal: Any, operation: Operation, body: Any) -> None:
    """The rule for the checkpoints a body lists (after the body was validated)."""
    if operation.owner is not Owner.CHECKPOINTS or not isinstance(principal, UserPrincipal):
        return
    for item in (body or {}).get("checkpoints", []):
        master.users.check_may_act(
            principal, "checkpoint", item["uuid"], operation.verb or "change"
        )


def check_owner(master: Any, principal: Any, kind: str, key: Any, verb: str) -> None:
    """The rule for an object a body names (e.g. a fork's `parent_id`); a key of the wrong
    type is left to the handler's own 400."""
    if (
        not isinstance(principal, UserPrincipal)
        or isinstance(key, bool)
        or not isinstance(key, int)
    ):
        return
    master.users.check_may_act(principal, kind, key, verb)


def creator_id(master: Any, principal: Any) -> int:
    """Who owns what a request creates: the signed-in user, or for a trial token its
    experiment's owner."""
    if isinstance(principal, TrialPrincipal):
        return int(master.views.experiment_row(principal.experiment_id).owner_id)
    return principal.user_id if isinstance(principal, UserPrincipal) else OWNER_ID


__all__ = ["check_body_owner", "check_owner", "check_path_owner", "creator_id"]
