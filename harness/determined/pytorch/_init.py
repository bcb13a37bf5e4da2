"""`det.pytorch.init()`: the PyTorchTrialContext for this process, on or off the master."""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

import determined as det
from determined import core
from determined.common import storage
from determined.pytorch._context import PyTorchTrialContext

logger = logging.getLogger("determined.pytorch")


def _truthy_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.random.manual_seed(seed)


def _device_for(local_rank: int) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def _local_checkpoint_storage(exp_conf: dict[str, Any] | None) -> Any:
    """Off the master, honour the config's checkpoint_storage (else the user data directory)."""
    config = (exp_conf or {}).get("checkpoint_storage")
    if not isinstance(config, dict):
        return None
    if config.get("type") == "shared_fs" and config.get("host_path"):
        return str(storage.checkpoint_base(config))
    if config.get("type") in ("directory", "s3", "gcs"):
        return config
    return None


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    distributed: core.DistributedContext | None = None,
    aggregation_frequency: int = 1,
    enable_tensorboard_logging: bool = True,
) -> Iterator[PyTorchTrialContext]:
    """`with det.pytorch.init() as context: trial = MyTrial(context); det.pytorch.Trainer(trial, context).fit(...)`.

    On the master (a TRIAL task) hparams, config, seed and distributed setup come from the
    cluster and the `distributed` argument is ignored; anywhere else they are what you pass.
    """
    info = det.get_cluster_info()
    local = info is None or info.task_type != "TRIAL"
    started_process_group = False
    try:
        if local:
            core_context = core.init(
                distributed=distributed, checkpoint_storage=_local_checkpoint_storage(exp_conf)
            )
            context_kwargs: dict[str, Any] = dict(
                trial_seed=None,
                hparams=hparams,
                exp_conf=exp_conf,
                steps_completed=0,
                managed_training=False,
            )
        else:
            assert info is not None
            if distributed is not None:
                logger.warning(
                    "det.pytorch.init(distributed=...) is ignored on the master: it builds its own"
                )
            distributed = None
            if _truthy_env("USE_HOROVOD"):
                raise NotImplementedError(
                    "horovod is not supported: launch with determined.launch.torch_distributed instead"
                )
            if _truthy_env("USE_TORCH_DISTRIBUTED"):
                if not torch.distributed.is_initialized():
                    backend = "nccl" if torch.cuda.is_available() else "gloo"
                    torch.distributed.init_process_group(backend=backend)
                    started_process_group = True
                distributed = core.DistributedContext.from_torch_distributed()
            elif len(info.slot_ids) > 1 or len(info.container_addrs) > 1:
                raise ValueError(
                    f"this trial has {len(info.slot_ids)} slots on {len(info.container_addrs)} container(s) "
                    "but no distributed launcher: use entrypoint `python3 -m determined.launch.torch_distributed "
                    "-- ...` (or a `module:Trial` entrypoint, which does that for you)"
                )
            trial = info.trial
            _seed_everything(trial.trial_seed)
            core_context = core.init(
                distributed=distributed,
                preempt_mode=core.PreemptMode.WorkersAskChief,
                tensorboard_mode=core.TensorboardMode.MANUAL,
            )
            context_kwargs = dict(
                trial_seed=trial.trial_seed,
                hparams=trial.hparams,
                exp_conf=trial._config,
                steps_completed=trial._steps_completed,
                managed_training=True,
                trial_id=trial.trial_id,
                experiment_id=trial.experiment_id,
            )
        with core_context:
            yield PyTorchTrialContext(
                core_context,
                aggregation_frequency=aggregation_frequency,
                enable_tensorboard_logging=enable_tensorboard_logging,
                device=_device_for(core_context.distributed.local_rank),
                **context_kwargs,
            )
    finally:
        if started_process_group and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
