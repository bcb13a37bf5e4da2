"""The environment a trial's run starts with (docs/internals.md lists every variable)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from master_lite._core._secrets import redact_config
from master_lite.runners import PYTHON, STARTUP_HOOK, entrypoint_argv, has_startup_hook
from master_lite.scheduler import GPU
from master_lite.store import CheckpointRow, ExperimentRow, TrialRow


def trial_environment(
    *,
    trial: TrialRow,
    experiment: ExperimentRow,
    allocation_id: str,
    run_id: int,
    token: str,
    slot_ids: list[int],
    gpus: list[GPU],
    checkpoint_steps: int,
    master_url: str,
    cluster_id: str,
    ports: dict[str, str],
) -> dict[str, str]:
    """The run's own variables: `DET_*`, its GPUs, ports and the config's
    `environment_variables`: `LaunchSpec.env` (a runner adds what its place needs)."""
    config = experiment.config
    checkpoint = trial.latest_checkpoint
    env = {
        "DET_MASTER": master_url,
        "DET_SESSION_TOKEN": token,
        "DET_CLUSTER_ID": cluster_id,
        "DET_AGENT_ID": socket.gethostname(),
        "DET_TASK_TYPE": "TRIAL",
        "DET_TASK_ID": f"trial-{trial.id}",
        "DET_ALLOCATION_ID": allocation_id,
        "DET_EXPERIMENT_ID": str(experiment.id),
        "DET_TRIAL_ID": str(trial.id),
        "DET_TRIAL_RUN_ID": str(run_id),
        "DET_TRIAL_SEED": str(trial.seed),
        "DET_HPARAMS": json.dumps(trial.hparams),
        # Without its secrets: the runner logs in to the registry and opens the gateway; the
        # trial's code (whose output anyone who may read the logs sees) needs neither.
        "DET_EXPERIMENT_CONFIG": json.dumps(redact_config(config)),
        "DET_STEPS_COMPLETED": str(checkpoint_steps),
        "DET_SLOT_IDS": json.dumps(slot_ids),
        "DET_GPU_UUIDS": json.dumps([g.uuid for g in gpus]),
        "DET_CONTAINER_ADDRS": json.dumps(["127.0.0.1"]),
        "DET_CONTAINER_RANK": "0",
        "DET_CONTAINER_SLOT_COUNTS": json.dumps([len(slot_ids)]),
        "CUDA_VISIBLE_DEVICES": ",".join(str(g.index) for g in gpus),
        # CUDA numbers GPUs fastest-first by default, NVML by PCI bus: make them agree, so
        # index i in CUDA_VISIBLE_DEVICES is the GPU whose uuid is in DET_GPU_UUIDS.
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "PYTHONUNBUFFERED": "1",
    }
    if checkpoint:
        env["DET_LATEST_CHECKPOINT"] = checkpoint
    env.update(_storage_credentials(config))
    # Distinct rendezvous ports per allocation: two multi-slot trials on one host must not
    # meet on torchrun's or DistributedContext's default ports.
    env.update(ports)
    env.update(_config_environment_variables(config, gpu=bool(gpus)))
    return env


def run_argv(
    entrypoint: str | list[str], work_dir: Path, image: str | None
) -> tuple[list[str], str]:
    """The run's argv (`LaunchSpec.argv`), and how the trial's log shows it.

    `python3` in it is the Python of wherever the run runs (the master's interpreter for a
    local process, the image's in a container): the runner decides, and sources a context's
    startup hook first."""
    argv = entrypoint_argv(entrypoint, python=PYTHON)
    shown = " ".join(argv)
    if has_startup_hook(work_dir):
        shown = f"{STARTUP_HOOK}, then {shown}"
    if image is not None:
        shown = f"{shown} (in a container of {image})"
    return argv, shown


def steps_to_resume(trial: TrialRow, checkpoint: CheckpointRow | None) -> int:
    """DET_STEPS_COMPLETED of a run resuming from the trial's latest checkpoint (its row, or
    None when the trial has none or the row is gone)."""
    if not trial.latest_checkpoint:
        return 0
    if checkpoint is None:
        return trial.steps_completed
    if checkpoint.trial_id == trial.id:
        return checkpoint.steps_completed
    return 0  # a warm start from another trial's checkpoint begins at step 0


def _storage_credentials(config: dict) -> dict[str, str]:
    """The checkpoint storage's keys, which DET_EXPERIMENT_CONFIG shows as `********`: in a
    variable of their own (never in argv; the harness signs with them, determined.common.
    storage._s3), so the keys in the config suffice on every node."""
    storage = config.get("checkpoint_storage")
    if not isinstance(storage, dict):
        return {}
    keys = {k: storage[k] for k in ("access_key", "secret_key") if storage.get(k) is not None}
    if not keys:
        return {}
    return {"DET_CHECKPOINT_STORAGE_CREDENTIALS": json.dumps(keys)}


def _config_environment_variables(config: dict, *, gpu: bool) -> dict[str, str]:
    try:
        from determined.common.expconf import environment_variables

        return environment_variables(config, gpu=gpu)
    except ImportError:
        variables = (config.get("environment") or {}).get("environment_variables") or []
        if isinstance(variables, dict):
            variables = variables.get("cuda" if gpu else "cpu") or []
        return dict(str(v).split("=", 1) for v in variables if "=" in str(v))


__all__ = ["run_argv", "steps_to_resume", "trial_environment"]
