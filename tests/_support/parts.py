"""Building the master's parts (master_lite._master.build_parts) over a real store, without a
Master."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from master_lite._core import MasterState
from master_lite._core._events import EventBus
from master_lite._master._wiring import Parts, build_parts
from master_lite.checkpoints._gc import CheckpointCollector
from master_lite.reports._logwriter import LogWriter
from master_lite.runners import LaunchSpec, Runner
from master_lite.runs import RunSettings
from master_lite.scheduler import Scheduler
from master_lite.store import Store


class FakeRunner(Runner):
    """Starts nothing: records what the master asked, and exits runs when a test says so."""

    def __init__(self, *, log_sink, on_exit) -> None:
        super().__init__(log_sink=log_sink, on_exit=on_exit)
        self.launched: list[LaunchSpec] = []
        self.calls: list[tuple[str, str]] = []

    def launch(self, spec: LaunchSpec) -> int | None:
        self.launched.append(spec)
        self.calls.append(("launch", spec.allocation_id))
        return None

    def running(self) -> list[str]:
        return [spec.allocation_id for spec in self.launched]

    def send_signal(self, allocation_id: str, sig: int) -> bool:
        self.calls.append((f"signal {sig}", allocation_id))
        return True

    def terminate(self, allocation_id: str, grace: float) -> bool:
        self.calls.append(("terminate", allocation_id))
        return True

    def kill(self, allocation_id: str) -> bool:
        self.calls.append(("kill", allocation_id))
        return True

    def exit(self, allocation_id: str, exit_code: int) -> None:
        """The run's process ends with `exit_code` (as a runner's waiter thread reports it)."""
        self._on_exit(allocation_id, exit_code)


def open_state(root: Path, loop: asyncio.AbstractEventLoop) -> MasterState:
    """A MasterState over a fresh store under `root`, serving on `loop`."""
    for sub in ("contexts", "trials", "checkpoints"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    shared = MasterState(root, EventBus())
    shared.events.attach(loop)
    shared.open(Store(root / "master.db"), loop)
    return shared


@contextlib.asynccontextmanager
async def started_parts(
    root: Path, *, slots: int = 2, grace: float = 30.0
) -> AsyncIterator[tuple[Parts, FakeRunner]]:
    """Every part, wired as the Master wires them, with a FakeRunner; closed at the end."""
    loop = asyncio.get_running_loop()
    shared = open_state(root, loop)
    garbage: list[str] = []
    collectors: list[CheckpointCollector] = []  # built after the parts, as the Master does
    parts = build_parts(
        shared,
        scheduler=Scheduler(list(range(slots))),
        gpus=[],
        settings=RunSettings(
            cluster_id="parts-test", preemption_grace_seconds=grace, terminate_grace_seconds=1
        ),
        context_size_limit=1024 * 1024,
        collect_garbage=lambda: garbage.append("collected"),
        delete_checkpoint_files=lambda uuid: collectors[0].delete_checkpoint(uuid),
    )
    collectors.append(
        CheckpointCollector(
            shared.store, on_deleted=parts.checkpoints.publish_deleted, roots=shared.storage_roots
        )
    )
    log_writer = LogWriter(parts.logs.store_logs)
    runner = FakeRunner(log_sink=log_writer.submit, on_exit=parts.runs.exit_observed)
    parts.runs.attach(runner, log_writer, "http://127.0.0.1:9")
    try:
        yield parts, runner
    finally:
        # As the Master's stop does: a failing test must not leave TensorBoard processes.
        await parts.tensorboards.stop_all()
        log_writer.close()
        shared.closed = True
        shared.store.close()


def run_with_parts(
    root: Path,
    body: Callable[[Parts, FakeRunner], Awaitable[None]],
    *,
    slots: int = 2,
    hang_limit: float = 60.0,
) -> None:
    """`asyncio.run` of `await body(parts, runner)` over `started_parts(root, slots=slots)`; a
    body still running after `hang_limit` seconds fails (a guard against a hung test, no more)."""

    async def main() -> None:
        async with started_parts(root, slots=slots) as (parts, runner):
            await body(parts, runner)

    asyncio.run(asyncio.wait_for(main(), hang_limit))


async def settle(predicate, timeout: float = 10.0) -> None:
    """Let the loop run (exits arrive through the log writer's thread) until `predicate()`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the parts to settle")
        await asyncio.sleep(0.01)


SINGLE = {
    "name": "parts",
    "entrypoint": "python3 train.py",
    "max_restarts": 1,
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}},
    "hyperparameters": {"lr": 0.1},
}
