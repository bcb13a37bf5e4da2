"""Trials in containers: `ContainerRunner` runs each run in a container of its image.

A container run is one foreground `<runtime> run --rm` client process: its output is the
container's (captured line by line like a local process's), its exit status the trial's. So
the local runner runs the client, and this runner adds what only the runtime can do: signals,
stop and kill go to the container by name (signalling the client would leave the container
running), and the container is removed once the client ended, whatever ended it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from determined.common.containers import registry_of
from master_lite.runners._base import LaunchSpec, LogRecord, Runner
from master_lite.runners._startup_hook import has_startup_hook, with_startup_hook
from master_lite.runners.container._config import Mount, config_mounts, config_options
from master_lite.runners.container._pull import (
    PullState,
    pull_wrapper,
    pulls_dir,
    remove_leftover_pulls,
)
from master_lite.runners.container._runtime import (
    CONTAINER_SHELL,
    HARNESS_DEPENDENCIES_MOUNT,
    HARNESS_FALLBACK_ENV,
    HARNESS_MOUNT,
    ContainerRuntime,
    harness_mounts,
    in_container_argv,
)
from master_lite.runners.container._storage import (
    shared_fs_base,
    storage_mounts,
    tidy_view,
    trial_view_dir,
)
from master_lite.runners.process import LocalRunner

log = logging.getLogger("master_lite.containers")

# A runtime that does not answer a signal or stop request within this is reported, not awaited.
_COMMAND_TIMEOUT = 120
# How soon a signal that found no container yet (still being created) is sent again.
_RETRY_INTERVAL = 0.2
# `<runtime> run` exits with these when it could not run the container at all.
_RUNTIME_FAILURES = {
    125: "the container runtime could not start the container",
    126: "the container's command could not be invoked",
}


class ContainerRunner(Runner):
    """Runs each trial run in a container of its image (`LaunchSpec.image`)."""

    def __init__(
        self,
        *,
        log_sink: Callable[[list[LogRecord]], None],
        on_exit: Callable[[str, int], None],
        runtime: ContainerRuntime,
    ) -> None:
        super().__init__(log_sink=log_sink, on_exit=on_exit)
        self.runtime = runtime
        self._clients = LocalRunner(log_sink=log_sink, on_exit=self._client_exited, prestarted=0)
        self._names: dict[str, str] = {}
        self._trials: dict[str, int] = {}
        self._configs: dict[str, dict] = {}
        self._pulls: dict[str, PullState] = {}
        self._lock = threading.Lock()
        self._leftovers_removed = False
        self._cleanup_lock = threading.Lock()

    def config_problems(self, config: dict) -> list[str]:
        return self.runtime.config_problems(config)

    def image_stand_in(self, image: str) -> str | None:
        return self.runtime.stand_in(image)

    def remove_leftovers(self) -> None:
        """Remove the containers (and pull directories) a crashed master left (recovery ended
        or restarts their runs): once, before this runner's first container starts."""
        with self._cleanup_lock:
            if self._leftovers_removed:
                return
            self._leftovers_removed = True
            remove_leftover_pulls(self.runtime)
            try:
                self.runtime.remove(self.runtime.leftover_containers())
            except (OSError, subprocess.SubprocessError) as exc:
                log.warning("could not remove the containers of a previous master: %s", exc)

    def launch(self, spec: LaunchSpec) -> int:
        """Start the container's client process; returns its pid (its process group).

        The container gets the run's own environment only (`spec.env`), its work dir, the
        harness and the mounts its config names; `python3` is the image's, behind a check that
        the image has one, and a context's startup hook is sourced by the image's bash (else
        sh) first."""
        if spec.image is None:
            raise ValueError(f"{spec.allocation_id}: no image to run in a container")
        user_args = self._user_args(spec)
        if self.runtime.path() is None:
            raise OSError(
                f"the container runtime {self.runtime.binary!r} is not installed (set "
                "MasterLite.container_runtime, or install podman)"
            )
        self.remove_leftovers()
        name = self.runtime.container_name(spec.allocation_id)
        env = dict(spec.env)
        gpus = [int(i) for i in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if i.strip()]
        device_args, visible = self.runtime.gpu_args(gpus)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = visible
        env["PYTHONPATH"] = os.pathsep.join(p for p in (HARNESS_MOUNT, env.get("PYTHONPATH")) if p)
        env[HARNESS_FALLBACK_ENV] = HARNESS_DEPENDENCIES_MOUNT
        work_dir = str(spec.work_dir)
        mounts = [Mount(work_dir, work_dir), *harness_mounts()]
        mounts += [mount for _, mount in config_mounts(spec.config or {})]
        # Its own view of shared_fs checkpoint storage, not the whole storage (`_storage`).
        experiment_id = env.get("DET_EXPERIMENT_ID")
        mounts += storage_mounts(
            spec.config or {},
            trial_id=spec.trial_id,
            experiment_id=int(experiment_id) if experiment_id else None,
            restore_from=spec.restore_from,
            root_label=self.runtime.root_label,
            owner=spec.run_as.ids()[:2] if spec.run_as is not None else None,
        )
        argv = list(spec.argv)
        if has_startup_hook(spec.work_dir):
            argv = with_startup_hook(argv, shell=CONTAINER_SHELL)
        command = self.runtime.run_command(
            name=name,
            image=spec.image,
            argv=in_container_argv(argv, spec.image),
            env_names=sorted(env),
            work_dir=work_dir,
            mounts=mounts,
            device_args=user_args + device_args + config_options(spec.config or {}),
        )
        environment = (spec.config or {}).get("environment") or {}
        registry = registry_of(spec.image)
        pull = None
        if registry is not None:
            pull = PullState.create(
                pulls_dir(self.runtime), environment.get("registry_auth"), registry
            )
            command = pull_wrapper(
                self.runtime,
                spec.image,
                pull,
                force=bool(environment.get("force_pull_image")),
                run=command,
            )
        client_env = {**os.environ, **env}
        with self._lock:
            self._names[spec.allocation_id] = name
            self._trials[spec.allocation_id] = spec.trial_id
            self._configs[spec.allocation_id] = spec.config or {}
            if pull is not None:
                self._pulls[spec.allocation_id] = pull
        try:
            return self._clients.launch_process(
                LaunchSpec(
                    allocation_id=spec.allocation_id,
                    trial_id=spec.trial_id,
                    argv=command,
                    env=client_env,
                    work_dir=spec.work_dir,
                )
            )
        except BaseException:
            with self._lock:
                self._names.pop(spec.allocation_id, None)
                self._trials.pop(spec.allocation_id, None)
                self._configs.pop(spec.allocation_id, None)
                self._pulls.pop(spec.allocation_id, None)
            if pull is not None:
                pull.remove()
            raise

    def _user_args(self, spec: LaunchSpec) -> list[str]:
        """`run` options for a run as another account (`spec.run_as`): its uid:gid, its groups
        and umask 077 (what it saves is its own). Podman only: docker has no --umask, and
        without it the trial's checkpoints would be readable by other users' trials."""
        if spec.run_as is None:
            return []
        if self.runtime.name != "podman":
            raise NotImplementedError(
                f"{self.runtime.name} cannot run a trial as another Unix user "
                f"({spec.run_as.describe()}): use podman (MasterLite.container_runtime), or "
                "run_trials_as='master'"
            )
        uid, gid, groups = spec.run_as.ids()
        args = ["--user", f"{uid}:{gid if gid is not None else uid}", "--umask", "0077"]
        for group in groups:
            if group != gid:
                args += ["--group-add", str(group)]
        return args

    def _client_exited(self, allocation_id: str, exit_code: int) -> None:
        with self._lock:
            name = self._names.pop(allocation_id, None)
            trial_id = self._trials.pop(allocation_id, None)
            pull = self._pulls.pop(allocation_id, None)
            config = self._configs.pop(allocation_id, None)
        # A run that ended before its container started ended in its pull (its own line says
        # why, when the pull failed); its credentials go now if the shell could not remove them.
        ended_in_pull = pull is not None and pull.pulling()
        if pull is not None:
            pull.remove()
        if trial_id is not None:
            self._tidy_view(trial_id, config)
        if name is not None and not ended_in_pull:
            # `--rm` removes it when the client ends normally; a client that was killed (or a
            # runtime that failed half way) can leave it behind.
            try:
                self.runtime.remove([name])
            except (OSError, subprocess.SubprocessError) as exc:
                log.warning("could not remove container %s: %s", name, exc)
        if trial_id is not None and exit_code in _RUNTIME_FAILURES and not ended_in_pull:
            line = (
                f"{_RUNTIME_FAILURES[exit_code]} (exit code {exit_code} from "
                f"{self.runtime.name}; its message is in the lines above)"
            )
            self._log_sink([(trial_id, None, "master", time.time(), line)])
        self._on_exit(allocation_id, exit_code)

    def _tidy_view(self, trial_id: int, config: dict | None) -> None:
        """The run is over: what its view of the storage holds beyond its trial's checkpoints
        goes now (a save cut short, mount points), before any next run of the trial starts."""
        base = shared_fs_base(config or {})
        if base is None:
            return
        try:
            tidy_view(trial_view_dir(base, self.runtime.root_label, trial_id), base)
        except OSError as exc:
            log.warning("could not tidy trial %s's checkpoint view: %s", trial_id, exc)

    def running(self) -> list[str]:
        return self._clients.running()

    def pid_of(self, allocation_id: str) -> int | None:
        return self._clients.pid_of(allocation_id)

    def attach_info(self, allocation_id: str) -> dict[str, Any]:
        with self._lock:
            name = self._names.get(allocation_id)
        if name is None:
            return {}
        return {"container": name, "runtime": self.runtime.name}

    def _container_of(self, allocation_id: str) -> str | None:
        with self._lock:
            return self._names.get(allocation_id)

    def _in_background(self, allocation_id: str, command: list[str]) -> bool:
        """Run a runtime command off the caller's thread (the master's event loop).

        A signal sent while the client is still creating the container finds no container
        yet: the command is repeated until it succeeds or the run has ended."""
        if self._container_of(allocation_id) is None:
            return False

        def run() -> None:
            deadline = time.monotonic() + _COMMAND_TIMEOUT
            while True:
                try:
                    result = subprocess.run(command, capture_output=True, timeout=_COMMAND_TIMEOUT)
                except (OSError, subprocess.SubprocessError) as exc:
                    log.warning("%s failed: %s", " ".join(command[:3]), exc)
                    return
                ended = self._container_of(allocation_id) is None
                if result.returncode == 0 or ended or time.monotonic() > deadline:
                    return
                time.sleep(_RETRY_INTERVAL)

        threading.Thread(target=run, name=f"runtime-{allocation_id}", daemon=True).start()
        return True

    def _pulling(self, allocation_id: str) -> bool:
        with self._lock:
            pull = self._pulls.get(allocation_id)
        return pull is not None and pull.pulling()

    def send_signal(self, allocation_id: str, sig: int) -> bool:
        if self._pulling(allocation_id):
            # No container yet: the signal ends the pull (the client's process group).
            return self._clients.send_signal(allocation_id, sig)
        name = self._container_of(allocation_id)
        return name is not None and self._in_background(
            allocation_id, self.runtime.signal_command(name, sig)
        )

    def kill(self, allocation_id: str) -> bool:
        return self.send_signal(allocation_id, 9)

    def terminate(self, allocation_id: str, grace: float) -> bool:
        """SIGTERM the container's processes, SIGKILL them after `grace` seconds."""
        if self._pulling(allocation_id):
            return self._clients.terminate(allocation_id, grace)
        name = self._container_of(allocation_id)
        return name is not None and self._in_background(
            allocation_id, self.runtime.stop_command(name, grace)
        )


__all__ = ["ContainerRunner"]
