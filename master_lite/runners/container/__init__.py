"""The container runner: each trial run in a Podman or Docker container of its image."""

from master_lite.runners.container._config import container_image
from master_lite.runners.container._runner import ContainerRunner
from master_lite.runners.container._runtime import (
    CONTAINER_SHELL,
    ContainerRuntime,
    default_runtime,
    gpu_device_args,
    in_container_argv,
)

__all__ = [
    "CONTAINER_SHELL",
    "ContainerRunner",
    "ContainerRuntime",
    "container_image",
    "default_runtime",
    "gpu_device_args",
    "in_container_argv",
]
