"""Trial lifecycle: searcher operations, allocation, launch, preemption and process exits.

A mixin of `Master` (kept apart only to keep files small). Everything here runs on the event
loop thread; the runner's threads hand exits over with `call_soon_threadsafe`.

Exit semantics are Determined's (docs/fault-tolerance.md), decided by the allocation's *end
intent*:
* none, exit 0 -> COMPLETED (searcher: trial closed); exit != 0 -> restart from the latest
  checkpoint while restarts < max_restarts, else ERROR (searcher: exited early, ERRORED);
* "pause" -> PAUSED (resumed from its latest checkpoint on activate);
* "master-stop" -> PAUSED, resumed when the master starts again;
* "stop" (searcher early-stop) -> COMPLETED;  "cancel"/"kill"/"kill-trial" -> CANCELED.

Each exit is also put in words (the trial's `exit_summary`, `_exits`): the signal that ended the
run and, when the master sent it, why (each kill and termination records its reason).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

from determined.common import notebook_errors
from determined.common.states import TERMINAL_TRIAL_STATES, ExperimentState, TrialState
from master_lite import _auth, _exits, _serialize
from master_lite.scheduler import (
    DEFAULT_PRIORITY,
    STARTUP_HOOK,
    AllocationRequest,
    Grant,
    LaunchSpec,
    entrypoint_argv,
    has_startup_hook,
    with_startup_hook,
)

logger = logging.getLogger("master_lite")


def searcher_module() -> Any:
    # Imported late: the searchers are a separate package and unused until an experiment runs.
    return importlib.import_module("master_lite.searcher")


class TrialLifecycle:
    # -- atomic state changes -----------------------------------------------------------------
    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        """One store transaction around a state change and everything it causes (searcher
        events, its snapshot, trial states), so a master killed at any instant leaves the store
        before or after the change, never half-way. Launching processes is a side effect the
        store cannot roll back: it is deferred until the outermost transaction committed."""
        self._atomic_depth += 1
        try:
            with self.store.transaction():
                yield
        finally:
            self._atomic_depth -= 1
        if self._atomic_depth == 0 and self._scheduling_deferred:
            self._run_scheduler()

    # -- change notification for long polls ---------------------------------------------------
    def _notify(self, key: tuple) -> None:
        event = self._changed.pop(key, None)
        if event is not None:
            event.set()

    async def _wait_changed(self, key: tuple, timeout: float) -> None:
        event = self._changed.setdefault(key, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), max(timeout, 0))
        except asyncio.TimeoutError:
            pass

    # -- searcher -----------------------------------------------------------------------------
    def _searcher_event(self, exp_id: int, method: str, *args: Any) -> None:
        self._searcher_events(exp_id, [(method, args)])

    def _searcher_events(self, exp_id: int, calls: list[tuple[str, tuple]]) -> None:
        """Feed events to the searcher in order, then apply all their operations at once."""
        searcher = self._searchers.get(exp_id)
        if searcher is None:
            return
        ops: list = []
        with self._atomic():
            for method, args in calls:
                try:
                    ops.extend(getattr(searcher, method)(*args) or [])
                except Exception as exc:  # a searcher error ends the experiment, like Determined's
                    self._apply_operations(exp_id, ops)
                    self._fail_experiment(exp_id, f"searcher error in {method}: {exc}")
                    return
            self._apply_operations(exp_id, ops)

    def _save_searcher(self, exp_id: int) -> None:
        searcher = self._searchers.get(exp_id)
        if searcher is None:
            return
        self.store.update("experiments", exp_id, searcher_snapshot=searcher.snapshot())
        self._update_experiment_progress(exp_id)

    def _apply_operations(self, exp_id: int, ops: list) -> None:
        # Operations come from a searcher, so its package is loaded by now.
        from master_lite.searcher import Close, Create, Shutdown, Stop, ValidateAfter

        queue = list(ops)
        while queue:
            op = queue.pop(0)
            match op:
                case Create():
                    trial_id = self._create_trial(exp_id, op)
                    searcher = self._searchers[exp_id]
                    queue.extend(searcher.on_trial_created(op.request_id) or [])
                    self._schedule_trial(trial_id)
                case ValidateAfter():
                    self._queue_validate_after(exp_id, op.request_id, int(op.length))
                case Close():
                    trial = self._trial_by_request(exp_id, op.request_id)
                    if trial is not None:
                        self.store.update("trials", trial["id"], closed=1)
                        self._notify(("trial", trial["id"]))
                case Stop():
                    trial = self._trial_by_request(exp_id, op.request_id)
                    if trial is not None:
                        self._stop_trial(trial)
                case Shutdown():
                    self.store.update(
                        "experiments",
                        exp_id,
                        searcher_shutdown=1,
                        searcher_failure=int(op.failure),
                    )
                    self._maybe_finish_experiment(exp_id)
                case _:
                    raise ValueError(f"unknown searcher operation {op!r}")
        self._save_searcher(exp_id)

    def _create_trial(self, exp_id: int, op: Any) -> int:
        experiment = self.store.get("experiments", exp_id)
        state = (
            TrialState.ACTIVE
            if experiment["state"] == ExperimentState.ACTIVE
            else TrialState.PAUSED
        )
        # A warm start: the trial's first run gets the source as DET_LATEST_CHECKPOINT.
        checkpoint = getattr(op, "checkpoint", None) or experiment["warm_start_checkpoint"]
        trial_id = self.store.insert(
            "trials",
            experiment_id=exp_id,
            request_id=op.request_id,
            state=str(state),
            hparams=op.hparams,
            seed=op.trial_seed,
            start_time=time.time(),
            latest_checkpoint=checkpoint,
        )
        self._publish_trial(trial_id)
        return trial_id

    def _trial_by_request(self, exp_id: int, request_id: int) -> dict | None:
        return self.store.trials.by_request(exp_id, request_id)

    def _queue_validate_after(self, exp_id: int, request_id: int, length: int) -> None:
        trial = self._trial_by_request(exp_id, request_id)
        if trial is None:
            return
        queue = list(trial["op_queue"]) + [length]
        changes: dict[str, Any] = {"op_queue": queue}
        if trial["state"] == TrialState.COMPLETED:
            # It exited after running out of ops, and the searcher wants more (e.g. an ASHA
            # promotion): run it again from its latest checkpoint.
            changes.update(state=str(TrialState.ACTIVE), end_time=None, closed=0)
        self.store.update("trials", trial["id"], **changes)
        self._notify(("trial", trial["id"]))
        if trial["state"] == TrialState.COMPLETED:
            self._publish_trial(trial["id"])
            self._schedule_trial(trial["id"])

    # -- allocation ---------------------------------------------------------------------------
    def _schedule_trial(self, trial_id: int) -> None:
        """Ask for slots if the trial should run and neither runs nor waits already."""
        trial = self.store.get("trials", trial_id)
        experiment = self.store.get("experiments", trial["experiment_id"])
        if experiment["state"] != ExperimentState.ACTIVE or trial["state"] != TrialState.ACTIVE:
            return
        key = f"trial-{trial_id}"
        if trial_id in self._trial_allocation or self.scheduler.is_pending(key):
            return
        resources = experiment["config"].get("resources") or {}
        priority = resources.get("priority")
        slots = int(resources.get("slots_per_trial", 1))
        if slots > len(self.scheduler.slot_ids):
            self._master_log(
                trial_id,
                f"trial {trial_id} needs {slots} slots but this master has "
                f"{len(self.scheduler.slot_ids)}: it waits until the experiment is "
                "killed (lower resources.slots_per_trial)",
            )
        self.scheduler.request(
            AllocationRequest(
                allocation_key=key,
                experiment_id=experiment["id"],
                slots=slots,
                priority=DEFAULT_PRIORITY if priority is None else int(priority),
                max_slots=resources.get("max_slots"),
            )
        )
        self._run_scheduler()

    def _run_scheduler(self) -> None:
        if self._stopping or self._closed:
            return
        if self._atomic_depth:
            self._scheduling_deferred = True
            return
        self._scheduling_deferred = False
        for grant in self.scheduler.schedule():
            trial_id = int(grant.request.allocation_key.split("-", 1)[1])
            try:
                self._launch(trial_id, grant)
            except Exception as exc:  # the trial fails; the master keeps going
                self.scheduler.release(grant.request.allocation_key)
                self._master_log(trial_id, f"could not start trial {trial_id}: {exc}")
                self._trial_failed_to_start(trial_id)

    def _launch(self, trial_id: int, grant: Grant) -> None:
        trial = self.store.get("trials", trial_id)
        experiment = self.store.get("experiments", trial["experiment_id"])
        config = experiment["config"]
        run_id = trial["run_id"] + 1
        allocation_id = f"trial-{trial_id}.{run_id}"
        token = _auth.new_trial_token()
        work_dir = self.root_dir / "trials" / str(trial_id) / f"run-{run_id}"
        if work_dir.exists():  # left by a master that crashed before recording this run
            shutil.rmtree(work_dir)
        work_dir.mkdir(parents=True)
        if experiment["context_hash"]:
            from determined.common import context as context_mod

            context_mod.unpack(
                self._read_context(experiment["context_hash"]),
                work_dir,
                limit_bytes=self.context_size_limit,
            )
        slot_ids = list(grant.slot_ids)
        env = self._trial_environment(trial, experiment, allocation_id, run_id, token, slot_ids)
        argv = entrypoint_argv(config.get("entrypoint") or "", python=sys.executable)
        shown = " ".join(argv)
        if has_startup_hook(work_dir):
            # Sourced first, in the entrypoint's shell, as Determined's container entrypoint does.
            argv = with_startup_hook(argv)
            shown = f"{STARTUP_HOOK}, then {shown}"
        now = time.time()
        with self.store.transaction():
            # A new run: the previous run's notebook error no longer describes the trial.
            self.store.update(
                "trials", trial_id, run_id=run_id, state=str(TrialState.ACTIVE), notebook_error=None
            )
            self.store.insert(
                "allocations",
                id=allocation_id,
                trial_id=trial_id,
                run_id=run_id,
                state="RUNNING",
                slot_ids=slot_ids,
                start_time=now,
            )
            self.store.insert(
                "trial_tokens",
                token_hash=_auth.hash_token(token),
                trial_id=trial_id,
                allocation_id=allocation_id,
            )
        self._allocations[allocation_id] = {
            "id": allocation_id,
            "trial_id": trial_id,
            "experiment_id": experiment["id"],
            "slot_ids": slot_ids,
            "preempt": False,
            "acked": False,
            "intent": None,
            "key": grant.request.allocation_key,
            "signalled": {},
        }
        self._trial_allocation[trial_id] = allocation_id
        self._master_log(trial_id, f"starting {allocation_id} on slots {slot_ids}: {shown}")
        try:
            pid = self.runner.launch(
                LaunchSpec(
                    allocation_id=allocation_id,
                    trial_id=trial_id,
                    argv=argv,
                    env=env,
                    work_dir=work_dir,
                )
            )
        except OSError as exc:
            self._master_log(trial_id, f"could not start {argv[0]!r}: {exc}")
            self._loop.call_soon(self._on_exit, allocation_id, 127)
            return
        self.store.update("allocations", allocation_id, key_column="id", pid=pid, pgid=pid)
        self._publish_trial(trial_id)

    def _trial_environment(
        self,
        trial: dict,
        experiment: dict,
        allocation_id: str,
        run_id: int,
        token: str,
        slot_ids: list[int],
    ) -> dict[str, str]:
        config = experiment["config"]
        gpus = [self.gpus[i] for i in slot_ids] if self.gpus else []
        checkpoint = trial["latest_checkpoint"]
        steps = 0
        if checkpoint:
            row = self.store.get("checkpoints", checkpoint, key_column="uuid")
            if row is None:
                steps = trial["steps_completed"]
            elif row["trial_id"] == trial["id"]:
                steps = row["steps_completed"]
            # else: a warm start from another trial's checkpoint begins at step 0
        env = dict(os.environ)
        env.pop("DET_MASTER_TOKEN", None)
        env.pop("DET_LATEST_CHECKPOINT", None)
        # `python3` in an entrypoint must be the master's interpreter (its venv has determined).
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        env.update(
            {
                "DET_MASTER": self.master_url,
                "DET_SESSION_TOKEN": token,
                "DET_CLUSTER_ID": self.cluster_id,
                "DET_AGENT_ID": socket.gethostname(),
                "DET_TASK_TYPE": "TRIAL",
                "DET_TASK_ID": f"trial-{trial['id']}",
                "DET_ALLOCATION_ID": allocation_id,
                "DET_EXPERIMENT_ID": str(experiment["id"]),
                "DET_TRIAL_ID": str(trial["id"]),
                "DET_TRIAL_RUN_ID": str(run_id),
                "DET_TRIAL_SEED": str(trial["seed"]),
                "DET_HPARAMS": json.dumps(trial["hparams"]),
                "DET_EXPERIMENT_CONFIG": json.dumps(config),
                "DET_STEPS_COMPLETED": str(steps),
                "DET_SLOT_IDS": json.dumps(slot_ids),
                "DET_GPU_UUIDS": json.dumps([g.uuid for g in gpus]),
                "DET_CONTAINER_ADDRS": json.dumps(["127.0.0.1"]),
                "DET_CONTAINER_RANK": "0",
                "DET_CONTAINER_SLOT_COUNTS": json.dumps([len(slot_ids)]),
                "CUDA_VISIBLE_DEVICES": ",".join(str(g.index) for g in gpus),
                # CUDA numbers GPUs fastest-first by default, NVML by PCI bus: make them agree, so
                # index i in CUDA_VISIBLE_DEVICES is the GPU whose uuid is in DET_GPU_UUIDS.
                "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if checkpoint:
            env["DET_LATEST_CHECKPOINT"] = checkpoint
        # Distinct rendezvous ports per allocation: two multi-slot trials on one host must not
        # meet on torchrun's or DistributedContext's default ports.
        env.update(self.ports.trial_ports(allocation_id, live=self._allocations))
        env.update(_config_environment_variables(config, gpu=bool(gpus)))
        return env

    def _trial_failed_to_start(self, trial_id: int) -> None:
        trial = self.store.get("trials", trial_id)
        with self._atomic():
            self._end_trial(trial, TrialState.ERROR, exit_code=None)
            self._searcher_event(
                trial["experiment_id"],
                "on_trial_exited_early",
                trial["request_id"],
                searcher_module().ExitedReason.ERRORED,
            )
            self._maybe_finish_experiment(trial["experiment_id"])

    # -- preemption ---------------------------------------------------------------------------
    _INTENT_RANK = {
        None: 0,
        "stop": 1,
        "pause": 2,
        "master-stop": 2,
        "cancel": 3,
        "kill-trial": 4,
        "kill": 4,
    }
    # Why a preempted run was asked to exit, for the exit summary of one that had to be killed.
    _PREEMPTION_CAUSE = {
        "stop": "the searcher stopped the trial early",
        "pause": "the experiment was paused",
        "master-stop": "the master was shutting down",
        "cancel": "the experiment was canceled",
    }

    def _set_intent(self, allocation: dict, intent: str) -> None:
        if self._INTENT_RANK[intent] >= self._INTENT_RANK[allocation["intent"]]:
            allocation["intent"] = intent
            self.store.update("allocations", allocation["id"], end_intent=intent)

    def _preempt(self, allocation_id: str, intent: str) -> None:
        """Ask the run to checkpoint and exit; terminate it if it ignores us for too long."""
        allocation = self._allocations.get(allocation_id)
        if allocation is None:
            return
        self._set_intent(allocation, intent)
        if not allocation["preempt"]:
            allocation["preempt"] = True
            self.store.update("allocations", allocation_id, preempt_requested=1)
            self._notify(("allocation", allocation_id))
            self._grace_timers[allocation_id] = self._loop.call_later(
                self.preemption_grace_seconds, self._grace_expired, allocation_id
            )

    def _grace_expired(self, allocation_id: str) -> None:
        self._grace_timers.pop(allocation_id, None)
        allocation = self._allocations.get(allocation_id)
        if allocation is None:
            return
        self._master_log(
            allocation["trial_id"],
            f"{allocation_id} did not exit within {self.preemption_grace_seconds}s "
            "of the preemption signal: terminating it",
        )
        cause = self._PREEMPTION_CAUSE.get(allocation["intent"], "the master preempted it")
        why = (
            f"preempted ({cause}) and terminated by the master: it did not exit within "
            f"{self.preemption_grace_seconds:g}s of the preemption signal"
        )
        self._signalled(allocation, signal.SIGTERM, why)
        self._signalled(
            allocation,
            signal.SIGKILL,
            f"{why}, nor {self.terminate_grace_seconds:g}s after SIGTERM",
        )
        self.runner.terminate(allocation_id, self.terminate_grace_seconds)

    def _kill_allocation(self, allocation_id: str, intent: str, because: str) -> None:
        """SIGKILL the run now; `because` is what its exit summary will say."""
        allocation = self._allocations.get(allocation_id)
        if allocation is None:
            return
        self._set_intent(allocation, intent)
        allocation["preempt"] = True
        self._notify(("allocation", allocation_id))
        self._signalled(allocation, signal.SIGKILL, because)
        self.runner.kill(allocation_id)

    @staticmethod
    def _signalled(allocation: dict, sig: signal.Signals, because: str) -> None:
        # The first reason a signal was sent stays: it is what ended the run.
        allocation["signalled"].setdefault(int(sig), because)

    def _stop_trial(self, trial: dict) -> None:
        """Searcher early-stop: the run is preempted and its exit means COMPLETED."""
        if trial["state"] in TERMINAL_TRIAL_STATES:
            return
        self.store.update("trials", trial["id"], stop_requested=1)
        allocation_id = self._trial_allocation.get(trial["id"])
        if allocation_id is not None:
            self.store.update("trials", trial["id"], state=str(TrialState.STOPPING_COMPLETED))
            self._preempt(allocation_id, "stop")
            self._notify(("trial", trial["id"]))
            self._publish_trial(trial["id"])
            return
        self.scheduler.cancel(f"trial-{trial['id']}")
        self._end_trial(trial, TrialState.COMPLETED, exit_code=None)
        self._searcher_event(trial["experiment_id"], "on_trial_closed", trial["request_id"])
        self._maybe_finish_experiment(trial["experiment_id"])

    # -- exits --------------------------------------------------------------------------------
    def _exit_observed(self, allocation_id: str, exit_code: int) -> None:
        """Runner callback (waiter thread)."""
        loop = self._loop

        def hand_to_loop() -> None:
            try:
                loop.call_soon_threadsafe(self._on_exit, allocation_id, exit_code)
            except RuntimeError:  # the loop is closed: the master is gone
                pass

        self._log_writer.after_pending(hand_to_loop)

    def _on_exit(self, allocation_id: str, exit_code: int) -> None:
        if self._closed:
            return
        allocation = self._allocations.pop(allocation_id, None)
        if allocation is None:
            return
        timer = self._grace_timers.pop(allocation_id, None)
        if timer is not None:
            timer.cancel()
        trial_id = allocation["trial_id"]
        self._trial_allocation.pop(trial_id, None)
        self.scheduler.release(allocation["key"])
        try:
            # The run's end, the trial's new state and what the searcher makes of it commit
            # together: a crash in between would otherwise lose the searcher's event.
            with self._atomic():
                self.store.update(
                    "allocations",
                    allocation_id,
                    state="ENDED",
                    end_time=time.time(),
                    exit_code=exit_code,
                )
                self.store.allocations.revoke_tokens(allocation_id)
                sig = _exits.signal_of(exit_code)
                because = allocation["signalled"].get(int(sig)) if sig is not None else None
                summary = _exits.exit_summary(exit_code, signalled_because=because)
                self.store.update("trials", trial_id, exit_summary=summary)
                self._master_log(
                    trial_id,
                    f"{allocation_id} exited with code {exit_code}"
                    + (f": {summary}" if sig is not None else ""),
                )
                self._handle_trial_exit(trial_id, allocation, exit_code)
                trial = self.store.get("trials", trial_id)
                self._maybe_finish_experiment(trial["experiment_id"])
        except Exception:  # keep scheduling the others; the traceback goes to the master log
            logger.exception("while handling the exit of %s", allocation_id)
        self._notify(("allocation", allocation_id))
        self._run_scheduler()

    def _handle_trial_exit(self, trial_id: int, allocation: dict, exit_code: int) -> None:
        trial = self.store.get("trials", trial_id)
        experiment = self.store.get("experiments", trial["experiment_id"])
        exp_id = experiment["id"]
        intent = allocation["intent"]
        reasons = searcher_module().ExitedReason
        if intent in ("kill", "cancel", "kill-trial"):
            self._end_trial(trial, TrialState.CANCELED, exit_code)
            if intent == "kill-trial" and experiment["state"] == ExperimentState.ACTIVE:
                self._searcher_event(
                    exp_id, "on_trial_exited_early", trial["request_id"], reasons.USER_CANCELED
                )
        elif intent == "stop" or (exit_code == 0 and trial["early_exit"]):
            self._end_trial(trial, TrialState.COMPLETED, exit_code)
            if trial["early_exit"] != "INVALID_HP":  # the searcher already heard about it
                self._searcher_event(exp_id, "on_trial_closed", trial["request_id"])
        elif intent in ("pause", "master-stop") or (
            exit_code == 0 and allocation["acked"] and trial["op_queue"]
        ):
            # Out of ops when it asked, but the searcher has given it more since (a promotion
            # that came while it was exiting): run it again from its latest checkpoint.
            self._requeue_or_pause(trial, experiment)
        elif exit_code == 0:
            self._end_trial(trial, TrialState.COMPLETED, exit_code)
            if trial["early_exit"] != "INVALID_HP":
                self._searcher_event(exp_id, "on_trial_closed", trial["request_id"])
        elif trial["early_exit"] == "INVALID_HP":
            self._end_trial(trial, TrialState.COMPLETED, exit_code)
        elif trial["restarts"] < int(experiment["config"].get("max_restarts", 5)):
            self.store.update(
                "trials", trial_id, restarts=trial["restarts"] + 1, exit_code=exit_code
            )
            self._master_log(
                trial_id,
                f"trial {trial_id} failed (exit code {exit_code}); "
                f"restart {trial['restarts'] + 1} of "
                f"{experiment['config'].get('max_restarts', 5)}",
            )
            self._publish_trial(trial_id)
            self._schedule_trial(trial_id)
        else:
            self._end_trial(trial, TrialState.ERROR, exit_code)
            self._searcher_event(
                exp_id, "on_trial_exited_early", trial["request_id"], reasons.ERRORED
            )

    def _requeue_or_pause(self, trial: dict, experiment: dict) -> None:
        if experiment["state"] == ExperimentState.ACTIVE and not self._stopping:
            self.store.update("trials", trial["id"], state=str(TrialState.ACTIVE))
            self._publish_trial(trial["id"])
            self._schedule_trial(trial["id"])
        else:
            self.store.update("trials", trial["id"], state=str(TrialState.PAUSED))
            self._publish_trial(trial["id"])

    def _end_trial(self, trial: dict, state: TrialState, exit_code: int | None) -> None:
        changes: dict[str, Any] = {"state": str(state), "end_time": time.time()}
        if exit_code is not None:
            changes["exit_code"] = exit_code
        if state == TrialState.COMPLETED:
            changes["progress"] = 1.0
        self.store.update("trials", trial["id"], **changes)
        self._notify(("trial", trial["id"]))
        self._publish_trial(trial["id"])

    def _maybe_finish_experiment(self, exp_id: int) -> None:
        experiment = self.store.get("experiments", exp_id)
        state = experiment["state"]
        if state in (ExperimentState.COMPLETED, ExperimentState.CANCELED, ExperimentState.ERROR):
            return
        trials = self.store.trials.of_experiment(exp_id)
        running = [t for t in trials if t["id"] in self._trial_allocation]
        if state in (ExperimentState.STOPPING_CANCELED, ExperimentState.STOPPING_ERROR):
            if running:
                return
            for trial in trials:
                if trial["state"] not in TERMINAL_TRIAL_STATES:
                    self.scheduler.cancel(f"trial-{trial['id']}")
                    self._end_trial(trial, TrialState.CANCELED, None)
            final = (
                ExperimentState.CANCELED
                if state == ExperimentState.STOPPING_CANCELED
                else ExperimentState.ERROR
            )
            self._set_experiment_state(exp_id, final, ended=True)
            return
        if not experiment["searcher_shutdown"]:
            return
        unfinished = [t for t in trials if t["state"] not in TERMINAL_TRIAL_STATES]
        if unfinished:
            return
        failed = bool(experiment["searcher_failure"]) or (
            bool(trials) and all(t["state"] == TrialState.ERROR for t in trials)
        )
        self._set_experiment_state(
            exp_id, ExperimentState.ERROR if failed else ExperimentState.COMPLETED, ended=True
        )

    def _fail_experiment(self, exp_id: int, message: str) -> None:
        for trial in self.store.trials.of_experiment(exp_id):
            if trial["state"] in TERMINAL_TRIAL_STATES:
                continue
            self._master_log(trial["id"], message)
            allocation_id = self._trial_allocation.get(trial["id"])
            if allocation_id is not None:
                self._kill_allocation(
                    allocation_id,
                    "kill",
                    f"killed by the master (the experiment failed: {message})",
                )
        self._set_experiment_state(exp_id, ExperimentState.STOPPING_ERROR)
        self._maybe_finish_experiment(exp_id)

    def _set_experiment_state(
        self, exp_id: int, state: ExperimentState, *, ended: bool = False
    ) -> None:
        changes: dict[str, Any] = {"state": str(state)}
        if ended:
            changes["end_time"] = time.time()
        self.store.update("experiments", exp_id, **changes)
        self._publish_experiment(exp_id)
        if ended:
            # After the current change has committed: GC deletes files, which no rollback
            # could bring back.
            self._loop.call_soon(self._collect_checkpoint_garbage)

    def _update_experiment_progress(self, exp_id: int) -> None:
        searcher = self._searchers.get(exp_id)
        if searcher is None:
            return
        trials = self.store.trials.of_experiment(exp_id)
        per_trial = {
            t["request_id"]: (
                1.0 if t["state"] == TrialState.COMPLETED else float(t["progress"] or 0.0)
            )
            for t in trials
        }
        try:
            progress = float(searcher.progress(per_trial))
        except Exception:  # only the progress bar depends on it: the experiment keeps running
            logger.warning(
                "experiment %d: the searcher's progress() failed; the experiment's "
                "progress stays at its last value",
                exp_id,
                exc_info=True,
            )
            return
        self.store.update("experiments", exp_id, progress=max(0.0, min(1.0, progress)))

    # -- logs ---------------------------------------------------------------------------------
    def _store_logs(self, records: list) -> None:
        """Log sink of the runner: called from its reader threads (through the log writer).

        A run's `DET_NOTEBOOK_ERROR {...}` line (determined.common.notebook_errors) becomes
        its trial's `notebook_error`; the first of a run is kept (later ones, of other ranks,
        are usually consequences). The exit is handled after these lines are stored."""
        if self._closed:
            return
        ids = self.store.insert_logs(records)
        for trial_id, _, stream, _, line in records:
            if stream == "master" or not line.startswith(notebook_errors.MARKER):
                continue
            record = notebook_errors.parse_marker(line)
            if record is not None:
                self.store.trials.set_notebook_error_once(trial_id, record)
        if not self.events.has_subscribers("log"):
            return
        for log_id, (trial_id, rank, stream, timestamp, line) in zip(ids, records, strict=False):
            self.events.publish(
                "log",
                {
                    "id": log_id,
                    "trial_id": trial_id,
                    "rank": rank,
                    "stream": stream,
                    "time": _serialize.iso(timestamp),
                    "line": line,
                },
            )

    def _master_log(self, trial_id: int, line: str) -> None:
        self._store_logs([(trial_id, None, "master", time.time(), line)])


def _config_environment_variables(config: dict, *, gpu: bool) -> dict[str, str]:
    try:
        from determined.common.expconf import environment_variables

        return environment_variables(config, gpu=gpu)
    except ImportError:
        variables = (config.get("environment") or {}).get("environment_variables") or []
        if isinstance(variables, dict):
            variables = variables.get("cuda" if gpu else "cpu") or []
        return dict(str(v).split("=", 1) for v in variables if "=" in str(v))


__all__ = ["TrialLifecycle", "searcher_module"]
