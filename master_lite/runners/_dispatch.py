"""`DispatchingRunner`: one runner per kind, one owner per run.

Each run goes to the runner of its kind (a Jupyter kernel for experiments with
`environment.kernel`, a container for runs that name an image, else a local process), and the
dispatcher remembers which runner launched it: every later call about that run (signal,
terminate, attach, release) goes to its owner without asking the runners. A run stays owned
until it ended, or, when its runner still keeps something of it (`Runner.holds`: a failed kernel
trial's kernel), until the runner lets go of it: on `release`, or on its own (a kept kernel's
timer), which the runner tells through `Runner.on_released`.

`build_runner` makes the master's runner from one class per kind (the `MasterLite`
`*_runner_class` traits), so replacing one kind keeps the others.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

from master_lite.runners._base import ExitCallback, LaunchSpec, LogSink, Runner

log = logging.getLogger("master_lite.runners")

# Makes one kind's runner, given the callbacks it reports to.
RunnerFactory = Callable[[LogSink, ExitCallback], Runner]

PROCESS, CONTAINER, KERNEL = "process", "container", "kernel"


def kind_of(image: str | None, config: dict | None) -> str:
    """Which kind of runner runs a run of `config` with `image` (None: no container)."""
    if ((config or {}).get("environment") or {}).get("kernel") is not None:
        return KERNEL
    if image is not None:
        return CONTAINER
    return PROCESS


class DispatchingRunner(Runner):
    """Runs each run on the runner of its kind and routes later calls to that runner."""

    def __init__(
        self,
        *,
        log_sink: LogSink,
        on_exit: ExitCallback,
        process: RunnerFactory,
        container: RunnerFactory | None = None,
        kernel: RunnerFactory | None = None,
        remove_leftover_containers: bool = False,
    ) -> None:
        """A factory per kind; a kind without one is run by nobody (its experiments are
        refused at submit by the process runner's `config_problems`). The process runner is
        made now; the others when first needed.

        `remove_leftover_containers`: make the container runner now and let it remove the
        containers a crashed master left (its `remove_leftovers`, off the event loop)."""
        super().__init__(log_sink=log_sink, on_exit=on_exit)
        self._factories = {PROCESS: process, CONTAINER: container, KERNEL: kernel}
        self._runners: dict[str, Runner] = {}
        self._owners: dict[str, Runner] = {}
        self._lock = threading.Lock()
        self.runner(PROCESS)
        if remove_leftover_containers and container is not None:
            remove = getattr(self.runner(CONTAINER), "remove_leftovers", None)
            if remove is not None:
                threading.Thread(target=remove, name="container-leftovers", daemon=True).start()

    def runner(self, kind: str) -> Runner:
        """The runner of `kind` (made on first use); KeyError for a kind nobody runs."""
        with self._lock:
            existing = self._runners.get(kind)
            if existing is not None:
                return existing
            factory = self._factories.get(kind)
            if factory is None:
                raise KeyError(kind)
            made: Runner | None = None

            def ended(allocation_id: str, exit_code: int) -> None:
                self._ended(made, allocation_id, exit_code)

            made = factory(self._log_sink, ended)
            made.on_released(lambda allocation_id: self._forget(made, allocation_id))
            self._runners[kind] = made
            return made

    def _made(self) -> list[Runner]:
        with self._lock:
            return list(self._runners.values())

    def _ended(self, runner: Runner | None, allocation_id: str, exit_code: int) -> None:
        keep = runner is not None and runner.holds(allocation_id)
        with self._lock:
            if not keep and self._owners.get(allocation_id) is runner:
                del self._owners[allocation_id]
        self._on_exit(allocation_id, exit_code)

    def _forget(self, runner: Runner | None, allocation_id: str) -> None:
        """The runner let go of what it kept of the ended run (its timer ran out, or it was
        released): the run has no owner any more, unless the runner still runs it."""
        with self._lock:
            if self._owners.get(allocation_id) is runner and runner is not None:
                if allocation_id not in runner.running():
                    del self._owners[allocation_id]
        self._released(allocation_id)  # the dispatcher is a runner too: its listeners hear it

    def owner(self, allocation_id: str) -> Runner:
        """The runner that launched the run (the process runner for runs it does not know:
        those of a previous master)."""
        with self._lock:
            owner = self._owners.get(allocation_id)
        return owner if owner is not None else self.runner(PROCESS)

    def _for_config(self, config: dict) -> Runner:
        environment = config.get("environment") or {}
        if environment.get("kernel") is not None and self._factories[KERNEL] is not None:
            return self.runner(KERNEL)
        if environment.get("image") and self._factories[CONTAINER] is not None:
            return self.runner(CONTAINER)
        return self.runner(PROCESS)

    def config_problems(self, config: dict) -> list[str]:
        return self._for_config(config).config_problems(config)

    def image_stand_in(self, image: str) -> str | None:
        if self._factories[CONTAINER] is None:
            return None
        return self.runner(CONTAINER).image_stand_in(image)

    def launch(self, spec: LaunchSpec) -> int | None:
        kind = kind_of(spec.image, spec.config)
        runner = self.runner(kind) if self._factories[kind] is not None else self.runner(PROCESS)
        # Owned before it starts: its exit may be reported before launch() returns.
        with self._lock:
            self._owners[spec.allocation_id] = runner
        try:
            return runner.launch(spec)
        except BaseException:
            with self._lock:
                if self._owners.get(spec.allocation_id) is runner:
                    del self._owners[spec.allocation_id]
            raise

    def running(self) -> list[str]:
        return [aid for runner in self._made() for aid in runner.running()]

    def pid_of(self, allocation_id: str) -> int | None:
        return self.owner(allocation_id).pid_of(allocation_id)

    def attach_info(self, allocation_id: str) -> dict[str, Any]:
        return self.owner(allocation_id).attach_info(allocation_id)

    def holds(self, allocation_id: str) -> bool:
        return self.owner(allocation_id).holds(allocation_id)

    def send_signal(self, allocation_id: str, sig: int) -> bool:
        return self.owner(allocation_id).send_signal(allocation_id, sig)

    def terminate(self, allocation_id: str, grace: float) -> bool:
        return self.owner(allocation_id).terminate(allocation_id, grace)

    def kill(self, allocation_id: str) -> bool:
        return self.owner(allocation_id).kill(allocation_id)

    def release(self, allocation_id: str) -> None:
        owner = self.owner(allocation_id)
        with self._lock:
            if allocation_id not in owner.running():
                self._owners.pop(allocation_id, None)
        owner.release(allocation_id)

    def close(self) -> None:
        for runner in self._made():
            runner.close()


@dataclasses.dataclass(frozen=True)
class RunnerClasses:
    """One runner class per kind (the `MasterLite` `*_runner_class` traits); None: the built-in.

    Each is constructed with `log_sink=` and `on_exit=` and its kind's own keywords:
    process: none; container: `runtime=` (a `ContainerRuntime`); kernel: `jupyter_host=`,
    `loop=`, `gateway_default=`; ray: the `RayConnection` first, then `use_gpus=` (False:
    each run's resource pool says whether it runs on GPUs)."""

    process: type[Runner] | None = None
    container: type[Runner] | None = None
    kernel: type[Runner] | None = None
    ray: type[Runner] | None = None


def build_runner(
    classes: RunnerClasses,
    *,
    log_sink: LogSink,
    on_exit: ExitCallback,
    ray_cluster: Any = None,
    container_runtime: Any = None,
    jupyter_host: Any = None,
    loop: Any = None,
    kernel_gateway: Any = None,
) -> Runner:
    """The master's runner: Ray's when `ray_cluster` is given (it runs every run), else a
    `DispatchingRunner` over the process, container (when `container_runtime` is given) and
    kernel runners."""
    # Imported here: the kinds' modules import this package's base, and Ray's is optional.
    if ray_cluster is not None:
        from master_lite.runners.ray import RayRunner

        # Each kind's class takes its kind's own keywords, beyond the seam's (see RunnerClasses).
        ray_class: Any = classes.ray or RayRunner
        return ray_class(
            ray_cluster,
            log_sink=log_sink,
            on_exit=on_exit,
            use_gpus=False,
        )
    from master_lite.runners.container import ContainerRunner
    from master_lite.runners.kernel import KernelRunner
    from master_lite.runners.process import LocalRunner

    process_class = classes.process or LocalRunner
    container_class: Any = classes.container or ContainerRunner
    kernel_class: Any = classes.kernel or KernelRunner

    def container(sink: LogSink, ended: ExitCallback) -> Runner:
        return container_class(log_sink=sink, on_exit=ended, runtime=container_runtime)

    def kernel(sink: LogSink, ended: ExitCallback) -> Runner:
        return kernel_class(
            log_sink=sink,
            on_exit=ended,
            jupyter_host=jupyter_host,
            loop=loop if jupyter_host is not None else None,
            gateway_default=kernel_gateway,
        )

    return DispatchingRunner(
        log_sink=log_sink,
        on_exit=on_exit,
        process=lambda sink, ended: process_class(log_sink=sink, on_exit=ended),
        container=container if container_runtime is not None else None,
        kernel=kernel,
        remove_leftover_containers=(
            container_runtime is not None and container_runtime.path() is not None
        ),
    )


__all__ = ["DispatchingRunner", "RunnerClasses", "RunnerFactory", "build_runner", "kind_of"]
