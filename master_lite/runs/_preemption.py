"""The preemption side of the runs part: end intents, signals and the grace timers.

A run asked to exit (pause, cancel, searcher stop, master stop, the scheduler's rebalancing)
gets a preemption signal and `preemption_grace_seconds` to checkpoint and exit; then it is
terminated. Which intent wins and which signal was sent why are recorded on the run's
allocation record, so the exit summary can say what ended the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from collections.abc import Callable

from master_lite._core._shared import MasterState
from master_lite.reports._logs import TrialLogs
from master_lite.runners import Runner

# Which end intent wins when several are set (a kill overrides a pause, never the reverse).
# A scheduler's "rebalance" (the run goes back to waiting) yields to everything else: a searcher's
# stop of the same run must still end the trial.
INTENT_RANK = {
    None: 0,
    "rebalance": 1,
    "stop": 2,
    "pause": 3,
    "master-stop": 3,
    "cancel": 4,
    "kill-trial": 5,
    "kill": 5,
}
# Why a preempted run was asked to exit, for the exit summary of one that had to be killed.
PREEMPTION_CAUSE = {
    "stop": "the searcher stopped the trial early",
    "pause": "the experiment was paused",
    "master-stop": "the master was shutting down",
    "cancel": "the experiment was canceled",
    "rebalance": "the scheduler gave its slots to another job (fair share or priority)",
}


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """How runs are started and ended."""

    cluster_id: str
    preemption_grace_seconds: float
    terminate_grace_seconds: float


@dataclasses.dataclass(frozen=True)
class RunEnded:
    """A run's end, as the run-exits side needs it to decide the trial's fate."""

    allocation_id: str
    trial_id: int
    intent: str | None  # why the master ended it: None, stop, pause, master-stop, cancel, kill…
    acked: bool  # it acknowledged a preemption (it was told it has no more work)
    exit_code: int


class Preemption:
    """Preempts and kills runs (allocation records of the runs part); owns the grace timers."""

    def __init__(
        self,
        shared: MasterState,
        logs: TrialLogs,
        settings: RunSettings,
        *,
        is_live: Callable[[str], bool],
        runner: Callable[[], Runner],
    ) -> None:
        self._shared = shared
        self._logs = logs
        self._settings = settings
        self._is_live = is_live
        self._runner = runner
        self._grace_timers: dict[str, asyncio.TimerHandle] = {}

    def _set_intent(self, allocation: dict, intent: str) -> None:
        if INTENT_RANK[intent] >= INTENT_RANK[allocation["intent"]]:
            allocation["intent"] = intent
            self._shared.store.allocations.set_end_intent(allocation["id"], intent)

    def preempt(self, allocation: dict, intent: str) -> None:
        """Ask the run to checkpoint and exit; terminate it if it ignores us for too long."""
        self._set_intent(allocation, intent)
        if not allocation["preempt"]:
            allocation_id = allocation["id"]
            allocation["preempt"] = True
            self._shared.store.allocations.mark_preempt_requested(allocation_id)
            self._shared.notify(("allocation", allocation_id))
            self._grace_timers[allocation_id] = self._shared.loop.call_later(
                self._settings.preemption_grace_seconds, self._grace_expired, allocation
            )

    def _grace_expired(self, allocation: dict) -> None:
        allocation_id = allocation["id"]
        self._grace_timers.pop(allocation_id, None)
        if not self._is_live(allocation_id):
            return
        grace = self._settings.preemption_grace_seconds
        terminate_grace = self._settings.terminate_grace_seconds
        self._logs.master_log(
            allocation["trial_id"],
            f"{allocation_id} did not exit within {grace}s "
            "of the preemption signal: terminating it",
        )
        cause = PREEMPTION_CAUSE.get(allocation["intent"], "the master preempted it")
        why = (
            f"preempted ({cause}) and terminated by the master: it did not exit within "
            f"{grace:g}s of the preemption signal"
        )
        self._signalled(allocation, signal.SIGTERM, why)
        self._signalled(
            allocation, signal.SIGKILL, f"{why}, nor {terminate_grace:g}s after SIGTERM"
        )
        self._runner().terminate(allocation_id, terminate_grace)

    def kill(self, allocation: dict, intent: str, because: str) -> None:
        """SIGKILL the run now; `because` is what its exit summary will say."""
        self._set_intent(allocation, intent)
        allocation["preempt"] = True
        self._shared.notify(("allocation", allocation["id"]))
        self._signalled(allocation, signal.SIGKILL, because)
        self._runner().kill(allocation["id"])

    @staticmethod
    def _signalled(allocation: dict, sig: signal.Signals, because: str) -> None:
        # The first reason a signal was sent stays: it is what ended the run.
        allocation["signalled"].setdefault(int(sig), because)

    def cancel_timer(self, allocation_id: str) -> None:
        """The run exited: its grace timer has nothing left to do."""
        timer = self._grace_timers.pop(allocation_id, None)
        if timer is not None:
            timer.cancel()

    def cancel_all_timers(self) -> None:
        """The master stops: no timer may fire after it."""
        for timer in self._grace_timers.values():
            timer.cancel()
        self._grace_timers.clear()


__all__ = ["INTENT_RANK", "PREEMPTION_CAUSE", "Preemption", "RunEnded", "RunSettings"]
