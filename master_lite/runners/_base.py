"""The seam between the master and whatever runs a trial's processes.

The master asks a runner to launch one run of a trial (`LaunchSpec`: argv, the run's own
environment, work dir, and optionally its image, experiment config and Unix user), to signal,
terminate or kill it, and hears back through two callbacks given at construction:
`log_sink(records)` with the run's output lines, and `on_exit(allocation_id, exit_code)` once it
ended. Each kind of runner is a package beside this module (`process`, `container`, `kernel`,
`ray`); `DispatchingRunner` (`_dispatch.py`) picks one per run and remembers which one owns it.
A deployment replaces one kind through its `MasterLite.<kind>_runner_class` trait.

Standard-library only, like `_exits` and `_lines`: runners never import the master's parts
(nor the scheduler, which imports this module's TRIAL_PORT_NAMES).
"""

from __future__ import annotations

import abc
import dataclasses
import os
import pwd
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

# One captured line of a run: (trial_id, rank, stream, time, line).
LogRecord = tuple[int, "int | None", str, float, str]
LogSink = Callable[[list[LogRecord]], None]
ExitCallback = Callable[[str, int], None]
# The variables of a run's own rendezvous ports (`LaunchSpec.env`; the scheduler's
# PortAllocator picks them): torchrun's store and the two ZMQ ports of DistributedContext.
TRIAL_PORT_NAMES = (
    "C10D_PORT",
    "INTER_TRAIN_PROCESS_COMM_PORT_1",
    "INTER_TRAIN_PROCESS_COMM_PORT_2",
)


@dataclasses.dataclass(frozen=True)
class RunAs:
    """The Unix account a run's processes run as (instead of the master's).

    `user` names it (its groups are then looked up); `uid`/`gid` give it by number;
    `groups` are supplementary group ids (None: the user's, when `user` is given)."""

    user: str | None = None
    uid: int | None = None
    gid: int | None = None
    groups: tuple[int, ...] | None = None

    def describe(self) -> str:
        return self.user or f"uid {self.uid}" + (f" gid {self.gid}" if self.gid is not None else "")

    def ids(self) -> tuple[int, int | None, tuple[int, ...]]:
        """(uid, gid, supplementary gids) of the account: a named user's looked up (its own
        groups, as a login gets them, unless `groups` says otherwise). OSError: no such user;
        ValueError: neither a name nor a uid."""
        if self.user is None and self.uid is None:
            raise ValueError("run_as: give a user name or a uid")
        uid, gid, groups = self.uid, self.gid, self.groups
        if self.user is not None:
            try:
                entry = pwd.getpwnam(self.user)
            except KeyError:
                raise OSError(f"run_as: no Unix user {self.user!r} on this machine") from None
            uid = entry.pw_uid if uid is None else uid
            gid = entry.pw_gid if gid is None else gid
            if groups is None:
                groups = tuple(os.getgrouplist(self.user, entry.pw_gid))
        assert uid is not None
        return uid, gid, tuple(groups or ())


@dataclasses.dataclass
class LaunchSpec:
    """One trial run to start.

    `env` is the run's own environment only: its `DET_*` variables, GPUs, ports and the config's
    `environment_variables`. The runner decides what else its place needs: a local process (or
    a local kernel) gets the master's environment under it (`process_environment`), a container
    only these. `image`: the container image the run asks for (None: none); `config`: its
    experiment's config (mounts, `environment.kernel`, ...); `run_as`: the Unix account to run
    as (None: the master's own); `restore_from`: see the field; `hidden`: paths the run's code
    must not read (the master's secrets: its user token's directory, its store), which a runner
    that can hide them does (the process runner's sandbox); others may ignore it."""

    allocation_id: str
    trial_id: int
    argv: list[str]
    env: dict[str, str]
    work_dir: Path
    image: str | None = None
    config: dict | None = None
    run_as: RunAs | None = None
    # The checkpoint directory the run restores from (its trial's latest checkpoint, checked to
    # be a checkpoint directory of the master's storage), for runners that must make it visible.
    restore_from: Path | None = None
    hidden: tuple[Path, ...] = ()
    # The interpreter `python3` means in a local run (None: the master's own): a run as
    # another account (`run_as`) gets one that account can execute (MasterLite.trial_python).
    python: str | None = None


class Runner(abc.ABC):
    """Runs trial processes somewhere; the master calls only these methods.

    Subclasses take `log_sink` and `on_exit` as keyword arguments (what the `MasterLite`
    runner-class traits are constructed with, plus each kind's own keywords) and call them from
    any thread.
    """

    def __init__(self, *, log_sink: LogSink, on_exit: ExitCallback) -> None:
        self._log_sink = log_sink
        self._on_exit = on_exit
        self._release_listeners: list[Callable[[str], None]] = []

    def on_released(self, callback: Callable[[str], None]) -> None:
        """Call `callback(allocation_id)` whenever this runner lets go of what it kept of an
        ended run (`holds` turns False): on `release`, or on its own (a kept kernel's timer ran
        out). Whoever records runs' owners (the dispatcher) forgets the run then."""
        # setdefault: a subclass that skipped Runner.__init__ can still be listened to.
        self.__dict__.setdefault("_release_listeners", []).append(callback)

    def _released(self, allocation_id: str) -> None:
        """For subclasses: the run's kept remains are gone; tell the listeners."""
        for callback in list(getattr(self, "_release_listeners", ())):
            callback(allocation_id)

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

    def image_stand_in(self, image: str) -> str | None:
        """A line for the trial's log when a run asking for container `image` is to run as a
        host process instead (Determined's published environment images that this machine
        cannot have); None: it runs in `image` (or is refused by `config_problems`)."""
        del image
        return None

    @abc.abstractmethod
    def launch(self, spec: LaunchSpec) -> int | None:
        """Start one run; returns its local process group id, or None when it has none here.

        Raises OSError (or ValueError) when the run cannot start: the master ends the run with
        that message instead of waiting for an exit. NotImplementedError when the spec asks for
        what this runner cannot do (`run_as` where it is not implemented)."""

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

    def holds(self, allocation_id: str) -> bool:
        """Whether something of the ended run is still kept here (a failed kernel trial's
        kernel, for post-mortem) until `release`; False for runners that keep nothing. A runner
        that keeps something calls `_released` when it lets go of it."""
        return False

    def release(self, allocation_id: str) -> None:  # noqa: B027 (most runners keep nothing)
        """Let go of what a finished run left for people to look at (a failed kernel trial's
        kernel kept for post-mortem); nothing for runners that keep nothing."""

    def lost_cause(self, allocation_id: str) -> str | None:
        """Why the ended run was lost to its place rather than failed (its Ray node or the
        cluster went away), asked once at its exit: the master then requeues the trial without
        counting a failure (docs/distributed.md, "Faults"). None: the run's own exit."""
        return None

    def close(self) -> None:  # noqa: B027 (optional: most runners hold nothing more)
        """Release what the runner holds beyond its runs (pools, connections)."""


def refuse_run_as(runner: Runner, spec: LaunchSpec, what: str = "") -> None:
    """NotImplementedError when `spec` asks to run as another Unix user: for the runners that
    cannot do that (the Ray runner; the kernel runner for gateway and hosted kernels). `what`:
    the part of the config that chose this runner, named in the message as what to change."""
    if spec.run_as is not None:
        change = f"remove {what} from the experiment's config, or " if what else ""
        raise NotImplementedError(
            f"{type(runner).__name__} cannot run a trial as another Unix user "
            f"({spec.run_as.describe()}): with MasterLite.run_trials_as='owner' only process, "
            "container and local kernel trials run as their owner (docs/team.md, 'What runs as "
            f"whom'); {change}set run_trials_as='master'"
        )


def terminate_with_grace(
    stop: Callable[[], bool],
    still_running: Callable[[], bool],
    kill: Callable[[], object],
    grace: float,
) -> bool:
    """Terminate-with-grace, the one copy: `stop()` now (SIGTERM, an interrupt); when that
    reached the run, `kill()` after `grace` seconds unless `still_running()` says it ended.
    Returns what `stop()` returned. The timer is a daemon thread: a master that exits first
    leaves the rest to the run's own end."""
    if not stop():
        return False

    def kill_if_still_running() -> None:
        if still_running():
            kill()

    timer = threading.Timer(grace, kill_if_still_running)
    timer.daemon = True
    timer.start()
    return True


__all__ = [
    "ExitCallback",
    "LaunchSpec",
    "LogRecord",
    "LogSink",
    "RunAs",
    "Runner",
    "TRIAL_PORT_NAMES",
    "refuse_run_as",
    "terminate_with_grace",
]
