"""Reading a launcher's environment into `DistributedContext`'s rank arguments.

Each function returns the keyword arguments of `DistributedContext(...)` for one launcher
(torchrun, the DeepSpeed launcher, Horovod, TensorFlow's ``TF_CONFIG``); the public
``DistributedContext.from_*`` class methods construct the context from them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def torch_distributed(chief_ip: str | None) -> dict[str, Any]:
    env = _require_env(
        [
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "GROUP_RANK",
            "GROUP_WORLD_SIZE",
        ],
        "from_torch_distributed() must run in a process started by torchrun, e.g. through "
        "python3 -m determined.launch.torch_distributed",
    )
    return {
        "rank": env["RANK"],
        "size": env["WORLD_SIZE"],
        "local_rank": env["LOCAL_RANK"],
        "local_size": env["LOCAL_WORLD_SIZE"],
        "cross_rank": env["GROUP_RANK"],
        "cross_size": env["GROUP_WORLD_SIZE"],
        "chief_ip": chief_ip or os.environ.get("DET_CHIEF_IP"),
    }


def deepspeed(chief_ip: str | None) -> dict[str, Any]:
    env = _require_env(
        ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"],
        "from_deepspeed() must run in a process started by the deepspeed launcher",
    )
    return {
        "rank": env["RANK"],
        "size": env["WORLD_SIZE"],
        "local_rank": env["LOCAL_RANK"],
        "local_size": env["LOCAL_SIZE"],
        "cross_rank": env["CROSS_RANK"],
        "cross_size": env["CROSS_SIZE"],
        "chief_ip": chief_ip or os.environ.get("DET_CHIEF_IP"),
    }


def horovod(hvd: Any, chief_ip: str | None) -> dict[str, Any]:
    def cross(method: str, env_name: str) -> int:
        if hasattr(hvd, method):
            return int(getattr(hvd, method)())
        if env_name in os.environ:
            return int(os.environ[env_name])
        raise ValueError(f"from_horovod(): hvd.{method}() is missing and {env_name} is not set")

    return {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "cross_rank": cross("cross_rank", "HOROVOD_CROSS_RANK"),
        "cross_size": cross("cross_size", "HOROVOD_CROSS_SIZE"),
        "chief_ip": chief_ip or os.environ.get("DET_CHIEF_IP"),
    }


def tf_config() -> tuple[dict[str, Any], Callable[[], Any]]:
    """The rank arguments from ``TF_CONFIG`` and a function making the matching strategy.

    The strategy is made only after the context: constructing the context is the collective
    that every worker must reach first.
    """
    import json

    import tensorflow as tf  # only the caller who asks for it pays for the import

    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    workers = config.get("cluster", {}).get("worker", [])
    if len(workers) > 1:
        task_type = config.get("task", {}).get("type")
        if task_type != "worker":
            raise RuntimeError(
                "DistributedContext.from_tf_config() only supports the default strategy, "
                "MirroredStrategy or MultiWorkerMirroredStrategy, but found unexpected "
                f'task_type="{task_type}" in TF_CONFIG ({os.environ["TF_CONFIG"]})'
            )
        index = int(config["task"]["index"])
        chief_ip = os.environ.get("DET_CHIEF_IP") or workers[0].rsplit(":", 1)[0]
        local_rank, local_size, cross_rank, cross_size = tf_local_layout(index, len(workers))
        kwargs = {
            "rank": index,
            "size": len(workers),
            "local_rank": local_rank,
            "local_size": local_size,
            "cross_rank": cross_rank,
            "cross_size": cross_size,
            "chief_ip": chief_ip,
        }
        return kwargs, tf.distribute.MultiWorkerMirroredStrategy
    single = dict.fromkeys(["rank", "size", "local_rank", "local_size", "cross_rank", "cross_size"])

    def strategy() -> Any:
        if len(tf.config.list_physical_devices("GPU")) > 1:
            return tf.distribute.MirroredStrategy()
        return tf.distribute.get_strategy()

    return single, strategy


def tf_local_layout(index: int, size: int) -> tuple[int, int, int, int]:
    """(local_rank, local_size, cross_rank, cross_size) of TF_CONFIG worker `index`.

    Determined runs one TensorFlow worker per node, so each is local rank 0 of 1 and its node
    index is its rank. `determined.launch.tensorflow` here may run several workers on one node;
    it then also sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and
    GROUP_WORLD_SIZE, which are used when they agree with TF_CONFIG.
    """
    names = [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
    ]
    try:
        rank, world, local_rank, local_size, cross_rank, cross_size = (
            int(os.environ[name]) for name in names
        )
    except (KeyError, ValueError):
        return 0, 1, index, size
    if (rank, world) != (index, size) or not 0 <= local_rank < local_size <= size:
        return 0, 1, index, size
    if not 0 <= cross_rank < cross_size:
        return 0, 1, index, size
    return local_rank, local_size, cross_rank, cross_size


def _require_env(names: list[str], hint: str) -> dict:
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise RuntimeError(f"environment variables {', '.join(missing)} are not set: {hint}")
    values = {}
    for name in names:
        try:
            values[name] = int(os.environ[name])
        except ValueError:
            raise ValueError(
                f"environment variable {name}={os.environ[name]!r} is not an integer"
            ) from None
    return values
