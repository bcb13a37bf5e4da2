"""`core_context.preempt`: has the master asked this trial to stop (pause, kill, scheduler)?

A daemon thread long-polls the master so `should_preempt()` is a cached read after the first
answer (in WorkersAskChief mode it is still a synchronization point: the chief broadcasts).
"""

from __future__ import annotations

import enum
import logging
import threading
from typing import Any

logger = logging.getLogger("determined.core")

LONG_POLL_S = 60
RETRY_AFTER_ERROR_S = 10.0

# What the master's `reason` field (master_lite's extension of the preemption answer) means.
_REASONS = {
    "pause": "user pause",
    "master-stop": "master stopping",
    "cancel": "experiment canceled",
    "stop": "the searcher stopped this trial",
    "rebalance": "the scheduler gave its slots to another job; it resumes later",
}


class PreemptMode(str, enum.Enum):
    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"
    WorkersAskMaster = "WORKERS_ASK_MASTER"

    def __str__(self) -> str:
        return self.value


class _PreemptionWatcher:
    """First a 0 s poll, then 60 s long polls until the (sticky) signal arrives."""

    def __init__(
        self, session: Any, allocation_id: str, retry_after_error_s: float = RETRY_AFTER_ERROR_S
    ):
        self._session = session
        self._allocation_id = allocation_id
        self._retry_after_error_s = retry_after_error_s
        self._preempted = False
        # Why and how long (extension fields of master_lite's answer; absent from others).
        self.reason: str | None = None
        self.grace_seconds: float | None = None
        self._first_answer = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="PreemptionWatcherThread", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        # The long poll cannot be interrupted; the daemon thread ends with its current request.
        self._stop.set()

    def preempted(self) -> bool:
        self._first_answer.wait()
        return self._preempted

    def _run(self) -> None:
        timeout = 0
        while not self._stop.is_set():
            try:
                answer = self._session.get(
                    f"/allocations/{self._allocation_id}/signals/preemption",
                    params={"timeout_seconds": timeout},
                    timeout=timeout + 30,
                )
            except Exception as e:  # noqa: BLE001 - the watcher must survive any failure
                logger.warning("polling the master for preemption failed (will retry): %s", e)
                self._first_answer.set()  # treated as "not preempted" meanwhile
                self._stop.wait(self._retry_after_error_s)
                continue
            if answer.get("preempt"):
                self.reason = answer.get("reason")
                grace = answer.get("grace_seconds")
                self.grace_seconds = float(grace) if isinstance(grace, (int, float)) else None
                self._preempted = True
                self._first_answer.set()
                return
            self._first_answer.set()
            timeout = LONG_POLL_S


class PreemptContext:
    """`core_context.preempt`: whether the master wants this trial to stop (pause, kill, scheduler).

    Built by `det.core.init()`; users do not construct it. Each process that needs the answer (the
    chief, or every rank in `PreemptMode.WorkersAskMaster`) runs a `_PreemptionWatcher` thread from
    `start()` to `close()`.
    """

    def __init__(
        self,
        session: Any,
        allocation_id: str,
        distributed: Any,
        preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
        *,
        watcher_session: Any = None,
        retry_after_error_s: float = RETRY_AFTER_ERROR_S,
    ) -> None:
        self._session = session
        self._watcher_session = watcher_session or session
        self._allocation_id = allocation_id
        self._distributed = distributed
        self._mode = PreemptMode(preempt_mode)
        self._watcher: _PreemptionWatcher | None = None
        self._retry_after_error_s = retry_after_error_s
        self._started = False
        self._acked = False
        # For the once-only note to loops that never ask `should_preempt()` (`_on_report`).
        self._ever_checked = False
        self._unheeded_noted = False

    def _needs_watcher(self) -> bool:
        return self._distributed.rank == 0 or self._mode is PreemptMode.WorkersAskMaster

    def start(self) -> None:
        """Start watching for the preemption signal (called by `core.Context.__enter__`)."""
        self._started = True
        if self._needs_watcher():
            self._watcher = _PreemptionWatcher(
                self._watcher_session, self._allocation_id, self._retry_after_error_s
            )
            self._watcher.start()

    def close(self) -> None:
        """Stop watching (called when the `core.Context` closes)."""
        if self._watcher is not None:
            self._watcher.close()

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """Whether the master asked this trial to stop; if so, checkpoint and exit soon.

        The first call waits for the master's first answer; later calls read the answer the
        watcher thread keeps current. In `PreemptMode.WorkersAskChief` (the default) every rank
        must call it in step: the chief's answer is broadcast to the others.

        Args:
            auto_ack: when preempted, acknowledge the signal at once (on the chief), telling the
                master this process will exit and expects to be resumed later. Pass False to
                call `acknowledge_preemption_signal()` yourself, e.g. after a final checkpoint.

        Returns:
            True once the master has asked the trial to stop; it stays True.

        Raises:
            RuntimeError: called before the core context started (outside
                `with det.core.init()`), or on a non-chief rank with `PreemptMode.ChiefOnly`.
        """
        if not self._started:
            raise RuntimeError(
                "should_preempt() was called before the core context started; "
                "call it inside `with det.core.init() as core_context:`"
            )
        if self._mode is PreemptMode.ChiefOnly and self._distributed.rank != 0:
            raise RuntimeError(
                f"should_preempt() was called on rank {self._distributed.rank} with "
                "PreemptMode.ChiefOnly; only the chief (rank 0) may call it"
            )
        self._ever_checked = True
        if self._mode is PreemptMode.WorkersAskChief:
            answer = self._preempted() if self._distributed.rank == 0 else None
            preempted = bool(self._distributed.broadcast(answer))
        else:
            preempted = self._preempted()
        if preempted and auto_ack and self._distributed.rank == 0:
            self.acknowledge_preemption_signal()
        return preempted

    def _preempted(self) -> bool:
        """This process's own answer: the watcher's (waits for the master's first answer)."""
        assert self._watcher is not None
        return self._watcher.preempted()

    def acknowledge_preemption_signal(self) -> None:
        """Tell the master this process is about to exit and expects to be resumed.

        Only needed after `should_preempt(auto_ack=False)`; sending it twice is harmless (the
        second call does nothing).

        Also sent, with no preemption at all, when the searcher has no more operations for this
        trial (the master then starts it again if the searcher later has more): only a real
        preemption is logged, so a normal end does not read as one.

        Raises:
            determined.common.api.APIError: the master refused the acknowledgement.
        """
        if self._acked:
            return
        self._acked = True
        if self._preemption_requested():
            logger.info(
                "acknowledging the preemption signal: this process will exit and resume later"
            )
        self._session.post(f"/allocations/{self._allocation_id}/signals/ack_preemption")

    def _on_report(self) -> None:
        """A report (metrics, progress, searcher op) was made: say once if a stop is ignored.

        Determined's Core API leaves a loop that never calls `should_preempt()` to be killed
        when the preemption times out, silently. Reports are where such a loop still talks to
        us, so the first one after the signal logs one line saying what is going on and what
        to do; later reports say nothing more. A loop that calls `should_preempt()` at all is
        taken to handle the signal, so it never sees this line. Never waits, never raises.
        """
        if self._unheeded_noted or self._ever_checked or not self._preemption_requested():
            return
        self._unheeded_noted = True
        assert self._watcher is not None
        reason = self._watcher.reason
        why = _REASONS.get(reason or "", reason or "preemption")
        grace = self._watcher.grace_seconds
        within = f"in {grace:g} s" if grace is not None else "soon"
        logger.warning(
            "the master asked this trial to stop (%s); this loop does not check "
            "core_context.preempt.should_preempt(): save a checkpoint and exit when it returns "
            "True, or the trial is terminated %s and resumes from its last checkpoint "
            "(or from scratch, if it has none)",
            why,
            within,
        )

    def _preemption_requested(self) -> bool:
        """Whether the master has asked this process to stop (a cached read, never a wait)."""
        return self._watcher is not None and self._watcher._preempted


class DummyPreemptContext(PreemptContext):
    """Off the master: never preempted, but the same rank rules and synchronization."""

    def __init__(
        self, distributed: Any, preempt_mode: PreemptMode = PreemptMode.WorkersAskChief
    ) -> None:
        super().__init__(
            session=None, allocation_id="", distributed=distributed, preempt_mode=preempt_mode
        )

    def _needs_watcher(self) -> bool:
        return False  # there is no master to watch

    def _preempted(self) -> bool:
        return False

    def acknowledge_preemption_signal(self) -> None:
        logger.info("acknowledge_preemption_signal: nothing to acknowledge off the master")
