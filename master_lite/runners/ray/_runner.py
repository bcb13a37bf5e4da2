"""Ray resource manager: every trial run becomes Ray work, placed by Ray (user's view:
docs/gpus-and-distributed.md; faults and cluster shape: docs/distributed.md).

This runs in the master's Ray driver process (`_bridge`): Ray ends a driver that loses its
head, so the master keeps a proxy (`_proxy.RayRunner`) that outlives it. The master's
`Scheduler` decides *when* a run starts (slots: `_inventory`); Ray decides *where*.

* A run with N slots gets a placement group of N one-slot bundles (`{"GPU": 1}` or `{"CPU": 1}`,
  its pool's and avoided nodes' label selector, strategy PACK by default) and one
  `TrialContainer` actor per bundle: rank r of the run, on whichever node Ray chose.
  `DET_CONTAINER_ADDRS` lists the actors' node addresses, so torchrun runs with
  `--nnodes N --node_rank r` and the rendezvous on the chief's node (`DET_CHIEF_IP`).
* The context is packed once, `ray.put`, and every actor unpacks it into a fresh directory.
* A thread per run long-polls its actors for captured lines (`log_sink`); `on_exit` comes once
  every container has exited and every line was handed over. If one container fails (or its
  node is lost: `_faults`) the others are killed, so a lost rank brings the run down promptly.
* Pause/preemption goes through the master's API exactly as locally; kill/terminate signal the
  containers' process groups through their actors.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from master_lite.runners._base import (
    LaunchSpec,
    LogRecord,
    Runner,
    refuse_run_as,
    terminate_with_grace,
)
from master_lite.runners._exits import killed_exit_code
from master_lite.runners._lines import split_line
from master_lite.runners.ray import _faults
from master_lite.runners.ray._launch import (
    auth_hint,
    node_argv,
    requested_slots,
    runtime_env_setting,
)
from master_lite.runners.ray._signals import keep_signal_handlers
from master_lite.runners.ray._storage import warn_node_local_storage

RAY_ADDRESS_ENV = "MASTER_LITE_RAY_ADDRESS"
PLACEMENT_STRATEGY_ENV = "MASTER_LITE_RAY_PLACEMENT_STRATEGY"
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
_POLL_SECONDS = 0.5
logger = logging.getLogger("master_lite")
_PLACEMENT_NOTE_SECONDS = 60.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError(
            "resource_manager 'ray' needs Ray: pip install 'jupyter-determined[ray]' "
            "(or pip install ray), or use resource_manager 'local'"
        ) from None
    return ray


@dataclasses.dataclass(frozen=True)
class RaySlots:
    kind: str  # "gpu" or "cpu"
    count: int


class RayCluster:
    """The driver's connection to a Ray cluster (one per master process)."""

    def __init__(self, ray: Any, address: str | None) -> None:
        self.ray = ray
        self.address = address

    @classmethod
    def connect(cls, address: str | None = None) -> RayCluster:
        """Join the cluster at `address` ("auto", "ray://...", "host:port"); None means
        $MASTER_LITE_RAY_ADDRESS, then $RAY_ADDRESS, then a new local Ray instance."""
        ray = import_ray()
        address = (
            address or os.environ.get(RAY_ADDRESS_ENV) or os.environ.get("RAY_ADDRESS") or None
        )
        if not ray.is_initialized():
            try:
                with keep_signal_handlers():  # SIGTERM stays the master's clean stop
                    ray.init(
                        address=address,
                        include_dashboard=False,
                        log_to_driver=False,
                        configure_logging=False,
                    )
            except Exception as exc:
                raise ValueError(
                    f"cannot connect to the Ray cluster at {address or '(new local)'}"
                    f": {exc}; check ray_address / RAY_ADDRESS{auth_hint()}"
                ) from exc
        # The actor's modules import only the standard library and each other: shipped by value,
        # so Ray nodes need neither master_lite nor determined.
        from determined.common import context
        from master_lite.runners import _exits, _lines
        from master_lite.runners.ray import _actor

        for module in (_actor, _exits, _lines, context):
            ray.cloudpickle.register_pickle_by_value(module)
        return cls(ray, address)

    def slots(self) -> RaySlots:
        resources = self.ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        if gpus:
            return RaySlots("gpu", gpus)
        return RaySlots("cpu", int(resources.get("CPU", 0)))

    def nodes(self) -> list[dict]:
        return [
            {
                "node_id": n["NodeID"],
                "address": n.get("NodeManagerAddress"),
                "alive": bool(n.get("Alive")),
                "resources": n.get("Resources", {}),
                "labels": n.get("Labels") or {},
                "manager_port": n.get("NodeManagerPort"),
            }
            for n in self.ray.nodes()
        ]

    def shutdown(self) -> None:
        if self.ray.is_initialized():
            self.ray.shutdown()


class _Run:
    def __init__(self, spec: LaunchSpec, slots: int, options: dict | None = None) -> None:
        self.spec = spec
        self.slots = slots
        # resource ("GPU"/"CPU"), selector (the bundles' label selector: pool, avoided nodes)
        self.options = options or {}
        self.placements: list[dict] = []
        self.actors: list[Any] = []
        self.placement_group: Any = None
        self.killed_with: int | None = None  # SIGTERM/SIGKILL asked for (maybe before start)
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None


class RayDriver(Runner):
    """Runs each trial in actors on a Ray cluster's nodes (see `_actor`); lives in the driver
    process (`_bridge`), driven by the master's `RayRunner` proxy."""

    def __init__(
        self,
        cluster: RayCluster,
        *,
        log_sink: Callable[[list[LogRecord]], None],
        on_exit: Callable[[str, int], None],
        use_gpus: bool,
        placement_strategy: str | None = None,
        runtime_env: dict | None = None,
    ) -> None:
        self.cluster = cluster
        self.ray = cluster.ray
        super().__init__(log_sink=log_sink, on_exit=on_exit)
        self.use_gpus = use_gpus
        strategy = (placement_strategy or os.environ.get(PLACEMENT_STRATEGY_ENV) or "PACK").upper()
        if strategy not in PLACEMENT_STRATEGIES:
            raise ValueError(
                f"Ray placement strategy {strategy!r} is not one of "
                f"{', '.join(PLACEMENT_STRATEGIES)} (${PLACEMENT_STRATEGY_ENV})"
            )
        self.placement_strategy = strategy
        # Every trial actor's Ray runtime_env (py_executable, working_dir, env_vars, ...):
        # docs/distributed.md, "Code and interpreter on the nodes".
        self.runtime_env = runtime_env_setting(runtime_env)
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()
        self._warned_experiments: set[str] = set()
        self.losses: dict[str, dict] = {}  # allocation -> the node lost under it (`_faults`)
        from master_lite.runners.ray._actor import TrialContainer

        self._actor_class = self.ray.remote(max_concurrency=4, max_restarts=0)(TrialContainer)

    def running(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    def launch(
        self, spec: LaunchSpec, slots: int | None = None, options: dict | None = None
    ) -> None:
        """Start placing and running `spec` in the background. Returns None: there is no local
        process group for the master to record."""
        refuse_run_as(self, spec)
        if slots is None:
            slots = requested_slots(spec.env)
        run = _Run(spec, slots, options)
        with self._lock:
            self._runs[spec.allocation_id] = run
        run.thread = threading.Thread(
            target=self._drive, args=(run,), name=f"ray-{spec.allocation_id}", daemon=True
        )
        run.thread.start()
        return None

    # -- the run's thread ---------------------------------------------------------------------
    def _drive(self, run: _Run) -> None:
        allocation_id = run.spec.allocation_id
        code = 1
        try:
            warn_node_local_storage(self, run)
            code = self._place_and_run(run)
        except Exception as exc:  # noqa: BLE001 - any failure ends the run with a message
            self._master_line(
                run, f"Ray could not run {allocation_id}: {type(exc).__name__}: {exc}"
            )
            code = killed_exit_code(run.killed_with) if run.killed_with else 1
        finally:
            self._cleanup(run)
            with self._lock:
                self._runs.pop(allocation_id, None)
            self._on_exit(allocation_id, code)

    def _place_and_run(self, run: _Run) -> int:
        ray = self.ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from master_lite.runners.ray._actor import container_environment

        spec = run.spec
        containers = max(1, run.slots)
        resource = run.options.get("resource") or ("GPU" if self.use_gpus else "CPU")
        resource = resource if run.slots > 0 else "CPU"
        selector = run.options.get("selector") or {}
        run.placement_group = placement_group(
            [{resource: 1}] * containers,
            strategy=self.placement_strategy,
            name=spec.allocation_id,
            bundle_label_selector=[dict(selector)] * containers if selector else None,
        )
        waiting_since = time.monotonic()
        next_note = waiting_since + _PLACEMENT_NOTE_SECONDS
        ready_ref = run.placement_group.ready()
        while True:  # wait for Ray to place it; a kill meanwhile ends the wait
            if run.killed_with is not None:
                return killed_exit_code(run.killed_with)
            ready, _ = ray.wait([ready_ref], timeout=_POLL_SECONDS)
            if ready:
                break
            if time.monotonic() > next_note:
                next_note += _PLACEMENT_NOTE_SECONDS
                self._master_line(
                    run,
                    f"{spec.allocation_id} has waited "
                    f"{time.monotonic() - waiting_since:.0f} s for Ray to place "
                    f"{containers} x {{'{resource}': 1}} (strategy "
                    f"{self.placement_strategy}{', nodes ' + str(selector) if selector else ''})"
                    "; is a node gone?",
                )
        options = {"num_gpus": 1, "num_cpus": 0} if resource == "GPU" else {"num_cpus": 1}
        with run.lock:
            for index in range(containers):
                run.actors.append(
                    self._actor_class.options(
                        scheduling_strategy=PlacementGroupSchedulingStrategy(
                            run.placement_group, placement_group_bundle_index=index
                        ),
                        name=None,
                        **options,
                        **({"runtime_env": self.runtime_env} if self.runtime_env else {}),
                    ).remote(spec.allocation_id)
                )
        placements = ray.get([actor.where.remote() for actor in run.actors])
        run.placements = placements
        for rank, place in enumerate(placements):
            self._master_line(
                run,
                f"{spec.allocation_id} container {rank} on Ray node "
                f"{place['node_id']} ({place['ip']}), worker pid "
                f"{place['pid']}, GPUs {place['gpu_ids']}",
            )
        if run.killed_with is not None:
            return killed_exit_code(run.killed_with)
        context_ref = ray.put(_pack_work_dir(spec.work_dir))
        # Each node runs it in its own environment under the run's variables (never the
        # master's environment), `python3` the node's interpreter, a startup hook sourced first.
        argv, python_at = node_argv(list(spec.argv), spec.work_dir)
        starts = []
        for rank, actor in enumerate(run.actors):
            env = container_environment(
                spec.env, rank=rank, placements=placements, use_gpus=resource == "GPU"
            )
            starts.append(actor.start.remote(argv, env, context_ref, python_at))
        ray.get(starts)
        if run.killed_with is not None:  # signalled while the containers were starting
            self._signal_all(run, run.killed_with)
        return self._stream(run)

    def _stream(self, run: _Run) -> int:
        ray = self.ray
        exit_codes: dict[int, int] = {}
        polls = {actor.poll.remote(_POLL_SECONDS): rank for rank, actor in enumerate(run.actors)}
        heard = {rank: time.monotonic() for rank in polls.values()}
        while polls:
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=_POLL_SECONDS * 4)
            answered = set(ready)
            waiting = [rank for ref, rank in polls.items() if ref not in answered]
            silent = _faults.silent_ranks(heard, waiting, time.monotonic())
            if silent:  # a partition, or a node Ray has not declared dead yet
                return self._lost(run, silent[0], None, exit_codes)
            for ref in ready:
                rank = polls.pop(ref)
                heard[rank] = time.monotonic()
                try:
                    lines, code = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - the actor (or its node) is gone
                    if self._node_lost(run, rank, exc):
                        return self._lost(run, rank, exc, exit_codes)
                    self._master_line(
                        run,
                        f"{run.spec.allocation_id} container {rank} was lost: "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0]}",
                    )
                    lines, code = [], killed_exit_code(signal.SIGKILL)
                self._emit(run, lines)
                if code is None:
                    polls[run.actors[rank].poll.remote(_POLL_SECONDS)] = rank
                    continue
                exit_codes[rank] = code
                if code != 0 and len(exit_codes) < len(run.actors):
                    self._master_line(
                        run,
                        f"{run.spec.allocation_id} container {rank} exited "
                        f"with code {code}: stopping the other containers",
                    )
                    self._signal_all(run, signal.SIGKILL)
        failed = [code for rank, code in sorted(exit_codes.items()) if code != 0]
        return failed[0] if failed else 0

    def _node_lost(self, run: _Run, rank: int, exc: Exception) -> bool:
        node_id = run.placements[rank]["node_id"] if rank < len(run.placements) else None
        return node_id is not None and _faults.node_is_dead(self.cluster, node_id, exc)

    def _lost(self, run: _Run, rank: int, exc: Exception | None, codes: dict[int, int]) -> int:
        _faults.end_lost(self, run, rank, exc, len(codes))  # requeued, avoiding that node
        self._signal_all(run, signal.SIGKILL)
        return killed_exit_code(signal.SIGKILL)

    def _emit(self, run: _Run, lines: list[tuple[str, float, bytes]]) -> None:
        records: list[LogRecord] = []
        for stream, when, raw in lines:
            for rank, text in split_line(raw):
                records.append((run.spec.trial_id, rank, stream, when, text))
        if records:
            try:
                self._log_sink(records)
            except Exception:  # noqa: BLE001 - a failing sink must not stop the stream
                pass

    def _master_line(self, run: _Run, text: str) -> None:
        try:
            self._log_sink([(run.spec.trial_id, None, "master", time.time(), text)])
        except Exception:  # noqa: BLE001 - as in _emit: a failing sink must not stop the run
            pass

    def _cleanup(self, run: _Run) -> None:
        from ray.util.placement_group import remove_placement_group

        with run.lock:
            actors, run.actors = run.actors, []
        for actor in actors:
            try:
                self.ray.kill(actor)
            except Exception:  # noqa: BLE001 - already dead
                pass
        if run.placement_group is not None:
            try:
                remove_placement_group(run.placement_group)
            except Exception:  # noqa: BLE001 - already removed, or Ray is gone: nothing to free
                pass

    # -- signals ------------------------------------------------------------------------------
    def _signal_all(self, run: _Run, sig: int) -> None:
        with run.lock:
            actors = list(run.actors)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                # Remembered: a run still being placed or started must not start after it.
                run.killed_with = int(sig)
        for actor in actors:
            actor.signal.remote(int(sig))  # fire and forget: a dead actor has nothing to stop

    def send_signal(self, allocation_id: str, sig: int) -> bool:
        with self._lock:
            run = self._runs.get(allocation_id)
        if run is None:
            return False
        self._signal_all(run, sig)
        return True

    def kill(self, allocation_id: str) -> bool:
        return self.send_signal(allocation_id, signal.SIGKILL)

    def terminate(self, allocation_id: str, grace: float) -> bool:
        """SIGTERM every container, then SIGKILL them if the run is still there after `grace`."""
        with self._lock:
            run = self._runs.get(allocation_id)

        def still_running() -> bool:
            with self._lock:
                return run is not None and self._runs.get(allocation_id) is run

        return terminate_with_grace(
            lambda: self.send_signal(allocation_id, signal.SIGTERM),
            still_running,
            lambda: self.kill(allocation_id),
            grace,
        )


def _pack_work_dir(work_dir: Any) -> bytes:
    from determined.common import context as context_mod

    return context_mod.pack(work_dir, limit_bytes=1 << 40)


__all__ = [
    "RayCluster",
    "RayDriver",
    "RaySlots",
    "RAY_ADDRESS_ENV",
    "PLACEMENT_STRATEGY_ENV",
    "import_ray",
]
