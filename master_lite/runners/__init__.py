"""Runners: what starts, signals and ends a trial's run (docs/internals.md, "Runners").

The seam (`Runner`, `LaunchSpec`, `RunAs`) is in `_base`, with terminate-with-grace; the exit
code rule is `_exits`', reading a run's output `_lines`'. Each kind of runner is a package of its
own (`process`, `container`, `kernel`, `ray`); `_dispatch` picks one per run, remembers the
owner of each run, and builds the master's runner from one class per kind. Runners never import
the master's parts.
"""

from master_lite.runners._base import (
    ExitCallback,
    LaunchSpec,
    LogRecord,
    LogSink,
    RunAs,
    Runner,
    refuse_run_as,
    terminate_with_grace,
)
from master_lite.runners._dispatch import (
    DispatchingRunner,
    RunnerClasses,
    build_runner,
    kind_of,
)
from master_lite.runners._exits import (
    determined_exit_line,
    exit_code_of,
    exit_summary,
    killed_exit_code,
    signal_of,
)
from master_lite.runners._lines import MAX_LINE_BYTES, read_lines, split_line
from master_lite.runners._startup_hook import STARTUP_HOOK, has_startup_hook, with_startup_hook
from master_lite.runners.container import (
    CONTAINER_SHELL,
    ContainerRunner,
    ContainerRuntime,
    container_image,
    default_runtime,
    gpu_device_args,
    in_container_argv,
)
from master_lite.runners.kernel import (
    DEFAULT_FILES_LIMIT,
    GatewayDefault,
    KernelRunner,
    fold_jupyter_gateway,
    kernel_program,
    kernel_settings,
)
from master_lite.runners.process import (
    PYTHON,
    LocalRunner,
    SparePool,
    entrypoint_argv,
    kill_orphaned_group,
    local_argv,
    plain_python_launch,
    process_environment,
    process_group_alive,
)
from master_lite.runners.ray import RayCluster, RayConnection, RayRunner

__all__ = [
    "CONTAINER_SHELL",
    "ContainerRunner",
    "ContainerRuntime",
    "DEFAULT_FILES_LIMIT",
    "DispatchingRunner",
    "ExitCallback",
    "GatewayDefault",
    "KernelRunner",
    "LaunchSpec",
    "LocalRunner",
    "LogRecord",
    "LogSink",
    "MAX_LINE_BYTES",
    "PYTHON",
    "RayCluster",
    "RayConnection",
    "RayRunner",
    "RunAs",
    "Runner",
    "RunnerClasses",
    "STARTUP_HOOK",
    "SparePool",
    "build_runner",
    "container_image",
    "default_runtime",
    "entrypoint_argv",
    "exit_code_of",
    "determined_exit_line",
    "exit_summary",
    "fold_jupyter_gateway",
    "gpu_device_args",
    "has_startup_hook",
    "in_container_argv",
    "kernel_program",
    "kernel_settings",
    "kill_orphaned_group",
    "killed_exit_code",
    "kind_of",
    "local_argv",
    "plain_python_launch",
    "process_environment",
    "process_group_alive",
    "read_lines",
    "refuse_run_as",
    "signal_of",
    "split_line",
    "terminate_with_grace",
    "with_startup_hook",
]
