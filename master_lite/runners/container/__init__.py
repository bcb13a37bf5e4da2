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
from master_lite.runners.container._storage import (
    VIEWS_DIR,
    link_into_storage,
    shared_fs_base,
    trial_view_dir,
    view_prefix,
)

__all__ = [
    "CONTAINER_SHELL",
    "VIEWS_DIR",
    "ContainerRunner",
    "ContainerRuntime",
    "container_image",
    "default_runtime",
    "gpu_device_args",
    "in_container_argv",
    "link_into_storage",
    "shared_fs_base",
    "trial_view_dir",
    "view_prefix",
]
