"""How a trial run is launched on a Ray node: its argv (the node's `python3`) and the Ray
runtime_env of its actors (docs/distributed.md, "Code and interpreter on the nodes").

The run's environment itself is built on the node (`_actor.node_environment`): the node's own
variables under the run's, never the master's environment.
"""

from __future__ import annotations

import json
import os
from typing import Any

from master_lite.runners.process import PYTHON, local_argv

RUNTIME_ENV_ENV = "MASTER_LITE_RAY_RUNTIME_ENV"


def runtime_env_setting(given: dict | None = None) -> dict | None:
    """The trial actors' Ray runtime_env: `given`, else $MASTER_LITE_RAY_RUNTIME_ENV (a JSON
    object), checked by Ray's own `RuntimeEnv` (ValueError naming the variable otherwise)."""
    source = "runtime_env"
    if given is None:
        raw = os.environ.get(RUNTIME_ENV_ENV, "").strip()
        if not raw:
            return None
        source = f"${RUNTIME_ENV_ENV}"
        try:
            given = json.loads(raw)
        except ValueError as exc:
            raise ValueError(
                f"{source} is not JSON ({exc}); give a Ray runtime_env as a JSON object, e.g. "
                '{"py_executable": "/opt/venv/bin/python"}'
            ) from None
    if not isinstance(given, dict):
        raise ValueError(
            f"{source} must be a JSON object (a Ray runtime_env), got {type(given).__name__}"
        )
    from ray.runtime_env import RuntimeEnv

    try:
        RuntimeEnv(**given)
    except Exception as exc:  # noqa: BLE001 - Ray's validation raises several kinds
        raise ValueError(f"{source} is not a Ray runtime_env Ray accepts: {exc}") from None
    return dict(given)


def auth_hint() -> str:
    """What to add to a failed connection's message when the master has no Ray token mode set:
    a cluster with token authentication refuses it (docs/distributed.md, "Ray token
    authentication")."""
    if os.environ.get("RAY_AUTH_MODE", "").strip():
        return ""
    return (
        "; a Ray cluster with token authentication also needs RAY_AUTH_MODE=token and its token "
        "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) in the master's environment"
    )


def node_argv(argv: list[str], work_dir: Any) -> tuple[list[str], int | None]:
    """`argv` as a node runs it (a context's startup hook sourced first), and the index of its
    `python3`, which the node replaces with its own interpreter (None: no `python3`)."""
    wrapped = local_argv(argv, work_dir, python=PYTHON)
    if not argv or argv[0] != PYTHON:
        return wrapped, None
    # local_argv keeps argv whole at its end (after the hook's shell and script, if any).
    return wrapped, len(wrapped) - len(argv)


__all__ = ["RUNTIME_ENV_ENV", "auth_hint", "node_argv", "runtime_env_setting"]


def requested_slots(env: dict[str, str]) -> int:
    """How many slots a run asks for: the length of its `DET_SLOT_IDS` (a JSON list; none when
    it is absent or not a list)."""
    try:
        value = json.loads(env.get("DET_SLOT_IDS") or "[]")
    except ValueError:
        return 0
    return len(value) if isinstance(value, list) else 0
