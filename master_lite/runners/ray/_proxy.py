"""The master's Ray runner: hands each run to the Ray driver process (`_bridge`, through a
`RayConnection`) and turns what comes back into the runner callbacks.

Runs lost to the cluster (docs/distributed.md, "Faults"): when the driver loses the head (or
is not connected when a run is launched) every run it had ends at once, and `lost_cause` tells
the master why, so the trial goes back to the queue to restart from its latest checkpoint
without counting a failure; the same for a run whose node was lost (`_faults`), whose trial
then avoids that node for its next attempts.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from master_lite.runners._base import (
    LaunchSpec,
    LogRecord,
    Runner,
    refuse_run_as,
    terminate_with_grace,
)
from master_lite.runners._exits import killed_exit_code
from master_lite.runners.ray import _faults
from master_lite.runners.ray._connection import RayConnection
from master_lite.runners.ray._launch import requested_slots, runtime_env_setting

PLACEMENT_STRATEGY_ENV = "MASTER_LITE_RAY_PLACEMENT_STRATEGY"
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


class RayRunner(Runner):
    """Runs each trial in actors on a Ray cluster's nodes (see `_runner.RayDriver`)."""

    def __init__(
        self,
        cluster: RayConnection,
        *,
        log_sink: Callable[[list[LogRecord]], None],
        on_exit: Callable[[str, int], None],
        use_gpus: bool = False,
        placement_strategy: str | None = None,
    ) -> None:
        super().__init__(log_sink=log_sink, on_exit=on_exit)
        import os

        strategy = (placement_strategy or os.environ.get(PLACEMENT_STRATEGY_ENV) or "PACK").upper()
        if strategy not in PLACEMENT_STRATEGIES:
            raise ValueError(
                f"Ray placement strategy {strategy!r} is not one of "
                f"{', '.join(PLACEMENT_STRATEGIES)} (${PLACEMENT_STRATEGY_ENV})"
            )
        # Checked here, in the master, so a bad one stops the start with a message naming the
        # variable (the driver process, which uses it, would only fail and be restarted).
        runtime_env_setting()
        self.cluster = cluster
        self.use_gpus = use_gpus  # unused: each run's pool says (kept for custom subclasses)
        self._runs: dict[str, int] = {}  # allocation id -> trial id
        self._lost: dict[str, str] = {}  # allocation id -> why (until the master asks)
        self._avoid: dict[int, set[str]] = {}  # trial id -> nodes lost under it
        self._lock = threading.Lock()
        cluster.listener = self

    # -- Runner --------------------------------------------------------------------------------
    def running(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    def launch(self, spec: LaunchSpec, slots: int | None = None) -> None:
        refuse_run_as(self, spec)
        if slots is None:
            slots = requested_slots(spec.env)
        inventory = self.cluster.inventory
        pool = ((spec.config or {}).get("resources") or {}).get(
            "resource_pool"
        ) or inventory.default
        options = {
            "resource": "GPU" if inventory.slot_type.get(pool) == "cuda" else "CPU",
            "selector": _faults.selector(
                pool,
                default=pool == inventory.default,
                pools=inventory.descriptions,
                avoid=self._avoided(spec.trial_id, pool),
                label=inventory.label,
            ),
        }
        with self._lock:
            self._runs[spec.allocation_id] = spec.trial_id
        if not self.cluster.send(("launch", spec, slots, options)):
            # Not connected: the run goes back to the queue (the scheduler had slots a moment
            # ago, so the cluster was lost just now).
            threading.Thread(
                target=self._end_lost, args=(spec.allocation_id, self.cluster.message), daemon=True
            ).start()
        return None

    def _avoided(self, trial_id: int, pool: str) -> set[str]:
        """The alive nodes of `pool` that were lost under the trial before, unless that is every
        alive node of the pool (then it is tried on them again rather than waiting forever: a
        node that came back from a partition, or a heartbeat missed on a very busy node)."""
        with self._lock:
            avoid = set(self._avoid.get(trial_id, ()))
        alive = {
            str(n.get("node_id"))
            for n in self.cluster.nodes
            if n.get("alive") and n.get("pool") == pool
        }
        return set() if alive and alive <= avoid else avoid & alive

    def send_signal(self, allocation_id: str, sig: int) -> bool:
        with self._lock:
            if allocation_id not in self._runs:
                return False
        self.cluster.send(("signal", allocation_id, int(sig)))  # lost with the cluster if not
        return True

    def kill(self, allocation_id: str) -> bool:
        return self.send_signal(allocation_id, signal.SIGKILL)

    def terminate(self, allocation_id: str, grace: float) -> bool:
        """SIGTERM every container, then SIGKILL them if the run is still there after `grace`."""

        def still_running() -> bool:
            with self._lock:
                return allocation_id in self._runs

        return terminate_with_grace(
            lambda: self.send_signal(allocation_id, signal.SIGTERM),
            still_running,
            lambda: self.kill(allocation_id),
            grace,
        )

    def lost_cause(self, allocation_id: str) -> str | None:
        with self._lock:
            return self._lost.pop(allocation_id, None)

    def cluster_status(self) -> dict:
        """The Ray connection's state, message and nodes (GET /master, GET /resources)."""
        return self.cluster.status()

    def close(self) -> None:
        self.cluster.close()

    # -- what the driver process says (the connection's thread) -----------------------------
    def message(self, message: tuple) -> None:
        kind = message[0]
        if kind == "log":
            self._log_sink(message[1])
        elif kind == "exit":
            _, allocation_id, code, loss = message
            with self._lock:
                trial_id = self._runs.pop(allocation_id, None)
                if loss and trial_id is not None:
                    self._avoid.setdefault(trial_id, set()).add(str(loss["node_id"]))
                    self._lost[allocation_id] = loss["cause"]
            if trial_id is not None:
                if loss:
                    self._line(
                        trial_id,
                        f"{allocation_id}: {loss['cause']}; the trial goes back to the queue to "
                        "restart from its latest checkpoint (not counted as a failure), avoiding "
                        f"node {loss['node_id']}",
                    )
                self._on_exit(allocation_id, int(code))

    def cluster_lost(self, why: str) -> None:
        with self._lock:
            lost = list(self._runs)
        for allocation_id in lost:
            self._end_lost(allocation_id, why)

    def _end_lost(self, allocation_id: str, why: str) -> None:
        with self._lock:
            trial_id = self._runs.pop(allocation_id, None)
            if trial_id is None:
                return
            self._lost[allocation_id] = f"lost with the Ray cluster ({why})"
        self._line(
            trial_id,
            f"{allocation_id}: waiting for the Ray cluster ({why}); the trial goes back to the "
            "queue to restart from its latest checkpoint (not counted as a failure)",
        )
        self._on_exit(allocation_id, killed_exit_code(signal.SIGKILL))

    def _line(self, trial_id: int, text: str) -> None:
        import time

        try:
            self._log_sink([(trial_id, None, "master", time.time(), text)])
        except Exception:  # noqa: BLE001 - a failing sink must not stop the exit
            pass


__all__ = ["PLACEMENT_STRATEGIES", "PLACEMENT_STRATEGY_ENV", "RayRunner"]
