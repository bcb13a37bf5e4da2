"""`SchedulingSettings`: the master's scheduling settings (docs/scheduling.md), as traitlets
traits with their `MASTER_LITE_*` environment variables. `MasterLite` inherits them beside
`MasterLiteSettings`, so they are `c.MasterLite.scheduler`, `--MasterLite.scheduler`, ...
"""

from __future__ import annotations

import json
import os
from typing import Any

from traitlets import Bool, Dict, Enum, Float, Integer, List, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from master_lite.scheduler import DEFAULT_MIN_RUN_SECONDS, POLICIES, Policy


def _env_json(name: str, kind: type, fallback: Any) -> Any:
    raw = os.environ.get(name)
    if not raw:
        return fallback
    try:
        value = json.loads(raw)
    except ValueError:
        raise TraitError(f"environment variable {name} is not valid JSON: {raw!r}") from None
    if not isinstance(value, kind):
        raise TraitError(f"environment variable {name}: expected a JSON {kind.__name__}")
    return value


def _env(name: str, convert: Any, fallback: Any) -> Any:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return fallback
    try:
        return convert(raw)
    except ValueError:
        raise TraitError(f"environment variable {name}={raw!r} is not valid") from None


def _boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


class SchedulingSettings(Configurable):
    """Which policy shares the slots, its knobs, quotas and resource pools."""

    scheduler = Enum(
        list(POLICIES),
        help="How slots are shared (Determined's scheduler types): 'fair_share' (default: "
        "equal shares between users, then between a user's experiments by resources.weight; "
        "runs above their share are preempted for users below theirs) or 'priority' "
        "(smaller resources.priority first; preempts less important runs when preemption is "
        "on). Env: MASTER_LITE_SCHEDULER.",
    ).tag(config=True)
    preemption = Bool(
        help="priority scheduler: whether a waiting job preempts running jobs of a less "
        "important priority (Determined's scheduler.preemption). Default true. "
        "Env: MASTER_LITE_PREEMPTION (true/false).",
    ).tag(config=True)
    scheduler_min_run_seconds = Float(
        help="A run is never preempted by the scheduler before it has run this long (seconds), "
        "so searches do not thrash. Default 10. Env: MASTER_LITE_SCHEDULER_MIN_RUN_SECONDS.",
    ).tag(config=True)
    max_slots_per_user = Integer(
        None,
        allow_none=True,
        help="The most slots one user's trials may hold at once (all pools); a request over it "
        "waits with a reason. Default: no limit. Env: MASTER_LITE_MAX_SLOTS_PER_USER.",
    ).tag(config=True)
    user_max_slots = Dict(
        help="Per-user slot quotas overriding max_slots_per_user, {username: slots}. "
        "Env: MASTER_LITE_USER_MAX_SLOTS (JSON).",
    ).tag(config=True)
    slot_hours_per_day = Float(
        None,
        allow_none=True,
        help="The slot-hours (GPU-hours on GPU slots) one user's runs may hold in a rolling "
        "24 hours; a user over it waits, with a reason saying when they may run again. "
        "Default: no limit. Env: MASTER_LITE_SLOT_HOURS_PER_DAY.",
    ).tag(config=True)
    user_slot_hours_per_day = Dict(
        help="Per-user slot-hours per day overriding slot_hours_per_day, {username: hours}. "
        "Env: MASTER_LITE_USER_SLOT_HOURS_PER_DAY (JSON).",
    ).tag(config=True)
    user_weights = Dict(
        help="fair_share: each user's weight between users, {username: weight} (default 1). "
        "Env: MASTER_LITE_USER_WEIGHTS (JSON).",
    ).tag(config=True)
    resource_pools = List(
        Dict(),
        help="Named pools of slots: [{pool_name, gpus: [indexes] | 'all'} or {pool_name, "
        "cpu_slots: N}, ...]. Default: one pool, 'default', with every slot. "
        "Env: MASTER_LITE_RESOURCE_POOLS (JSON).",
    ).tag(config=True)
    default_resource_pool = Unicode(
        help="The pool of experiments whose config names no resources.resource_pool "
        "(Determined's default_compute_resource_pool). Default: the first pool. "
        "Env: MASTER_LITE_DEFAULT_RESOURCE_POOL.",
    ).tag(config=True)

    @default("scheduler")
    def _default_scheduler(self) -> str:
        value = os.environ.get("MASTER_LITE_SCHEDULER") or "fair_share"
        if value not in POLICIES:
            raise TraitError(
                f"environment variable MASTER_LITE_SCHEDULER={value!r}: expected one of "
                f"{', '.join(POLICIES)}"
            )
        return value

    @default("preemption")
    def _default_preemption(self) -> bool:
        return bool(_env("MASTER_LITE_PREEMPTION", _boolean, True))

    @default("scheduler_min_run_seconds")
    def _default_min_run(self) -> float:
        return float(_env("MASTER_LITE_SCHEDULER_MIN_RUN_SECONDS", float, DEFAULT_MIN_RUN_SECONDS))

    @default("max_slots_per_user")
    def _default_max_slots_per_user(self) -> int | None:
        return _env("MASTER_LITE_MAX_SLOTS_PER_USER", int, None)

    @default("user_max_slots")
    def _default_user_max_slots(self) -> dict:
        return _env_json("MASTER_LITE_USER_MAX_SLOTS", dict, {})

    @default("slot_hours_per_day")
    def _default_slot_hours_per_day(self) -> float | None:
        return _env("MASTER_LITE_SLOT_HOURS_PER_DAY", float, None)

    @default("user_slot_hours_per_day")
    def _default_user_slot_hours_per_day(self) -> dict:
        return _env_json("MASTER_LITE_USER_SLOT_HOURS_PER_DAY", dict, {})

    @default("user_weights")
    def _default_user_weights(self) -> dict:
        return _env_json("MASTER_LITE_USER_WEIGHTS", dict, {})

    @default("resource_pools")
    def _default_resource_pools(self) -> list:
        return _env_json("MASTER_LITE_RESOURCE_POOLS", list, [])

    @default("default_resource_pool")
    def _default_default_resource_pool(self) -> str:
        return os.environ.get("MASTER_LITE_DEFAULT_RESOURCE_POOL") or ""

    @validate("scheduler_min_run_seconds")
    def _check_min_run(self, proposal: Any) -> float:
        if proposal["value"] < 0:
            raise TraitError(f"scheduler_min_run_seconds must be >= 0, got {proposal['value']}")
        return proposal["value"]

    def scheduling_policy(self) -> Policy:
        """The policy these settings describe; TraitError naming the setting when one is bad."""
        try:
            return Policy(
                kind=self.scheduler,
                preemption=self.preemption,
                min_run_seconds=self.scheduler_min_run_seconds,
                max_slots_per_user=self.max_slots_per_user,
                user_max_slots={str(k): int(v) for k, v in self.user_max_slots.items()},
                user_weights={str(k): float(v) for k, v in self.user_weights.items()},
                slot_hours_per_day=self.slot_hours_per_day,
                user_slot_hours_per_day={
                    str(k): float(v) for k, v in self.user_slot_hours_per_day.items()
                },
            )
        except (TypeError, ValueError) as exc:
            raise TraitError(str(exc)) from None


__all__ = ["SchedulingSettings"]
