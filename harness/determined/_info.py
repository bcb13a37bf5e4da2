"""Who am I? `det.get_cluster_info()` reads the DET_* environment the master gives a task.

Determined reads JSON files under /run/determined/info; master_lite has no containers, so the
local resource manager passes the same facts as environment variables (docs/internals.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any


def _json_env(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return json.loads(raw)
    except ValueError as e:
        raise ValueError(
            f"environment variable {name} is not valid JSON ({e}): {raw[:200]!r}"
        ) from e


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as e:
        raise ValueError(f"environment variable {name} must be an integer, got {raw!r}") from e


class TrialInfo:
    """Facts about the trial this process runs (only for task_type == "TRIAL")."""

    def __init__(
        self,
        trial_id: int,
        experiment_id: int,
        trial_seed: int,
        hparams: dict,
        config: dict,
        steps_completed: int,
        trial_run_id: int,
        debug: bool = False,
        inter_node_network_interface: str | None = None,
    ) -> None:
        self.trial_id = trial_id
        self.experiment_id = experiment_id
        self.trial_seed = trial_seed
        self.hparams = hparams
        self._config = config
        self._steps_completed = steps_completed
        self._trial_run_id = trial_run_id
        self._debug = debug
        self._inter_node_network_interface = inter_node_network_interface

    @classmethod
    def _from_env(cls, env: Mapping[str, str]) -> TrialInfo:
        config = _json_env(env, "DET_EXPERIMENT_CONFIG", {})
        return cls(
            trial_id=_int_env(env, "DET_TRIAL_ID", 0),
            experiment_id=_int_env(env, "DET_EXPERIMENT_ID", 0),
            trial_seed=_int_env(env, "DET_TRIAL_SEED", 0),
            hparams=_json_env(env, "DET_HPARAMS", {}),
            config=config,
            steps_completed=_int_env(env, "DET_STEPS_COMPLETED", 0),
            trial_run_id=_int_env(env, "DET_TRIAL_RUN_ID", 1),
            debug=bool(config.get("debug", False)) if isinstance(config, dict) else False,
            inter_node_network_interface=env.get("DET_INTER_NODE_NETWORK_INTERFACE") or None,
        )

    def __repr__(self) -> str:
        return f"TrialInfo(trial_id={self.trial_id}, experiment_id={self.experiment_id}, hparams={self.hparams})"


class RendezvousInfo:
    """How the containers of a multi-container task find each other."""

    def __init__(
        self, container_addrs: list[str], container_rank: int, container_slot_counts: list[int]
    ):
        self.container_addrs = container_addrs
        self.container_rank = container_rank
        self.container_slot_counts = container_slot_counts


class ResourcesInfo:
    """The GPUs and slots given to this container."""

    def __init__(self, gpu_uuids: list[str], slot_ids: list[int]):
        self.gpu_uuids = gpu_uuids
        self.slot_ids = slot_ids


class ClusterInfo:
    """Everything a task knows about where it runs; `det.get_cluster_info()` builds it."""

    def __init__(
        self,
        *,
        master_url: str,
        cluster_id: str,
        agent_id: str,
        slot_ids: list[int],
        task_id: str,
        allocation_id: str,
        session_token: str,
        task_type: str,
        master_cert_name: str | None = None,
        master_cert_file: str | None = None,
        latest_checkpoint: str | None = None,
        trial_info: TrialInfo | None = None,
        rendezvous_info: RendezvousInfo | None = None,
        resources_info: ResourcesInfo | None = None,
    ) -> None:
        self.master_url = master_url
        self.cluster_id = cluster_id
        self.agent_id = agent_id
        self.slot_ids = slot_ids
        self.task_id = task_id
        self.allocation_id = allocation_id
        self.session_token = session_token
        self.task_type = task_type
        self.master_cert_name = master_cert_name
        self.master_cert_file = master_cert_file
        self.latest_checkpoint = latest_checkpoint
        self._trial_info = trial_info
        self._rendezvous_info = rendezvous_info or RendezvousInfo(["127.0.0.1"], 0, [len(slot_ids)])
        self._resources_info = resources_info or ResourcesInfo([], slot_ids)

    @classmethod
    def _from_env(cls, env: Mapping[str, str]) -> ClusterInfo | None:
        if not env.get("DET_MASTER") or not env.get("DET_ALLOCATION_ID"):
            return None
        task_type = env.get("DET_TASK_TYPE") or ("TRIAL" if env.get("DET_TRIAL_ID") else "COMMAND")
        slot_ids = [int(s) for s in _json_env(env, "DET_SLOT_IDS", [])]
        trial_info = TrialInfo._from_env(env) if task_type == "TRIAL" else None
        rendezvous = RendezvousInfo(
            container_addrs=list(_json_env(env, "DET_CONTAINER_ADDRS", ["127.0.0.1"])),
            container_rank=_int_env(env, "DET_CONTAINER_RANK", 0),
            container_slot_counts=[
                int(c) for c in _json_env(env, "DET_CONTAINER_SLOT_COUNTS", [len(slot_ids)])
            ],
        )
        resources = ResourcesInfo(
            gpu_uuids=list(_json_env(env, "DET_GPU_UUIDS", [])), slot_ids=slot_ids
        )
        return cls(
            master_url=env["DET_MASTER"].rstrip("/"),
            cluster_id=env.get("DET_CLUSTER_ID", ""),
            agent_id=env.get("DET_AGENT_ID", ""),
            slot_ids=slot_ids,
            task_id=env.get("DET_TASK_ID", ""),
            allocation_id=env["DET_ALLOCATION_ID"],
            session_token=env.get("DET_SESSION_TOKEN", ""),
            task_type=task_type,
            master_cert_name=env.get("DET_MASTER_CERT_NAME") or None,
            master_cert_file=env.get("DET_MASTER_CERT_FILE") or None,
            latest_checkpoint=env.get("DET_LATEST_CHECKPOINT") or None,
            trial_info=trial_info,
            rendezvous_info=rendezvous,
            resources_info=resources,
        )

    @property
    def trial(self) -> TrialInfo:
        if self._trial_info is None:
            raise RuntimeError(
                f"ClusterInfo.trial is only available in trials; this task is a {self.task_type}"
            )
        return self._trial_info

    @property
    def user_data(self) -> dict:
        if self._trial_info is None:
            return {}
        return self._trial_info._config.get("data") or {}

    @property
    def container_addrs(self) -> list[str]:
        return self._rendezvous_info.container_addrs

    @property
    def container_rank(self) -> int:
        return self._rendezvous_info.container_rank

    @property
    def container_slot_counts(self) -> list[int]:
        return self._rendezvous_info.container_slot_counts

    @property
    def gpu_uuids(self) -> list[str]:
        return self._resources_info.gpu_uuids

    def __repr__(self) -> str:
        return f"ClusterInfo(task_id={self.task_id!r}, task_type={self.task_type!r}, master_url={self.master_url!r})"


_cached: tuple[tuple, ClusterInfo | None] | None = None


def get_cluster_info() -> ClusterInfo | None:
    """The ClusterInfo of this task, or None when not running under a master.

    Parsed once per distinct DET_* environment (tests and notebooks may change it in-process).
    """
    global _cached
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("DET_")))
    if _cached is None or _cached[0] != key:
        _cached = (key, ClusterInfo._from_env(os.environ))
    return _cached[1]
