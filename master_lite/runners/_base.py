"""The seam between the master and whatever runs a trial's processes.

The master asks a runner to launch one run of a trial (`LaunchSpec`: argv, environment, work
dir), to signal, terminate or kill it, and hears back through two callbacks given at
construction: `log_sink(records)` with the run's output lines, and `on_exit(allocation_id,
exit_code)` once it ended. Local subprocesses (`LocalRunner`) and Ray (`RayRunner`) implement
it; `ContainerRunner` runs trials in containers (`DispatchingRunner` picks it per run); a
runner of a deployment's own plugs in through `MasterLite.runner_class`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._local import LaunchSpec, LogRecord

LogSink = Callable[[list["LogRecord"]], None]
ExitCallback = Callable[[str, int], None]


class Runner(abc.ABC):
    """Runs trial processes somewhere; the master calls only these methods.

    Subclasses take `log_sink` and `on_exit` as keyword arguments (what `MasterLite.runner_class`
    is constructed with) and call them from any thread.
    """

    def __init__(self, *, log_sink: LogSink, on_exit: ExitCallback) -> None:
        self._log_sink = log_sink
        self._on_exit = on_exit

    def config_problems(self, config: dict) -> list[str]:
        """Why the trials of an experiment `config` cannot run here (checked at submit time;
        each problem names its config path and what to do). Runners that do not run containers
        refuse `environment.image` rather than silently running trials outside one."""
        if (config.get("environment") or {}).get("kernel") is not None:
            return [
                f"environment.kernel: {type(self).__name__} does not run trials in Jupyter "
                "kernels (remove environment.kernel, or use the local resource manager, whose "
                "kernel runner runs it)"
            ]
        if (config.get("environment") or {}).get("image"):
            return [
                f"environment.image: {type(self).__name__} does not run trials in containers "
                "(remove environment.image, or use the local resource manager, whose "
                "container runner runs it)"
            ]
        return []

    @abc.abstractmethod
    def launch(self, spec: LaunchSpec) -> int | None:
        """Start one run; returns its local process group id, or None when it has none here.

        Raises OSError (or ValueError) when the run cannot start: the master ends the run with
        that message instead of waiting for an exit."""

    @abc.abstractmethod
    def running(self) -> list[str]:
        """Allocation ids of the runs not ended yet."""

    @abc.abstractmethod
    def send_signal(self, allocation_id: str, sig: int) -> bool:
        """Deliver `sig` to the run's processes; False when it is not running."""

    @abc.abstractmethod
    def terminate(self, allocation_id: str, grace: float) -> bool:
        """SIGTERM now, SIGKILL after `grace` seconds if still running."""

    @abc.abstractmethod
    def kill(self, allocation_id: str) -> bool:
        """End the run at once."""

    def pid_of(self, allocation_id: str) -> int | None:
        """The run's local process id, when it has one on this machine."""
        return None

    def attach_info(self, allocation_id: str) -> dict[str, Any]:
        """How a person can reach the running run (a kernel's connection, a container's name):
        shown with the trial; empty when there is nothing to attach to."""
        return {}

    def release(self, allocation_id: str) -> None:  # noqa: B027 (most runners keep nothing)
        """Let go of what a finished run left for people to look at (a failed kernel trial's
        kernel kept for post-mortem); nothing for runners that keep nothing."""

    def close(self) -> None:  # noqa: B027 (optional: most runners hold nothing more)
        """Release what the runner holds beyond its runs (pools, connections)."""


__all__ = ["ExitCallback", "LogSink", "Runner"]
