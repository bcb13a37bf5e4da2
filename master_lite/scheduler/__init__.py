"""Scheduling: GPU inventory, slot allocation, and the local subprocess resource manager."""

from ._container_config import container_image
from ._container_runtime import (
    CONTAINER_SHELL,
    ContainerRuntime,
    default_runtime,
    gpu_device_args,
    in_container_argv,
)
from ._containers import ContainerRunner, DispatchingRunner
from ._gpus import FAKE_GPUS_ENV, GPU, discover_gpus, fake_gpus
from ._kernel_files import DEFAULT_FILES_LIMIT
from ._kernel_program import (
    GatewayDefault,
    fold_jupyter_gateway,
    kernel_program,
    kernel_settings,
)
from ._kernels import KernelRunner
from ._local import (
    LaunchSpec,
    LocalRunner,
    LogRecord,
    entrypoint_argv,
    kill_orphaned_group,
    process_group_alive,
    split_line,
)
from ._ports import TRIAL_PORT_NAMES, PortAllocator
from ._prestart import SparePool, plain_python_launch
from ._ray import RayCluster, RayRunner
from ._runner import Runner
from ._scheduler import DEFAULT_PRIORITY, AllocationRequest, Grant, Scheduler
from ._startup_hook import STARTUP_HOOK, has_startup_hook, with_startup_hook

__all__ = [
    "CONTAINER_SHELL",
    "ContainerRunner",
    "ContainerRuntime",
    "DispatchingRunner",
    "KernelRunner",
    "GatewayDefault",
    "DEFAULT_FILES_LIMIT",
    "fold_jupyter_gateway",
    "kernel_program",
    "kernel_settings",
    "container_image",
    "default_runtime",
    "gpu_device_args",
    "in_container_argv",
    "kill_orphaned_group",
    "GPU",
    "FAKE_GPUS_ENV",
    "discover_gpus",
    "fake_gpus",
    "LaunchSpec",
    "LocalRunner",
    "LogRecord",
    "entrypoint_argv",
    "process_group_alive",
    "split_line",
    "DEFAULT_PRIORITY",
    "AllocationRequest",
    "Grant",
    "Scheduler",
    "PortAllocator",
    "TRIAL_PORT_NAMES",
    "RayCluster",
    "RayRunner",
    "Runner",
    "SparePool",
    "plain_python_launch",
    "STARTUP_HOOK",
    "has_startup_hook",
    "with_startup_hook",
]
