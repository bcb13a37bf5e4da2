"""The runs part: allocations of slots to trials, their processes, preemption and exits.

Everything here runs on the event loop thread; the runner's threads hand exits over with
`call_soon_threadsafe`. What an exit *means* for the trial (completed, restarted, paused,
canceled) is the run-exits side's (`_run_exits.py`): this part records the run's end and hands
it over through `on_run_ended`, in the same transaction.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from determined.common.states import ExperimentState, TrialState
from master_lite import errors
from master_lite._core import _auth
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.reports._logs import TrialLogs
from master_lite.reports._logwriter import LogWriter
from master_lite.runners import (
    LaunchSpec,
    Runner,
    container_image,
    determined_exit_line,
    exit_summary,
    signal_of,
)
from master_lite.runs._accounts import TrialAccounts, hand_over, prepare_storage
from master_lite.runs._contexts import Contexts
from master_lite.runs._environment import run_argv, steps_to_resume, trial_environment
from master_lite.runs._keras import keras_environment
from master_lite.runs._kernel_attach import trial_kernel
from master_lite.runs._preemption import Preemption, RunEnded, RunSettings
from master_lite.runs._scheduling import (
    REBALANCE,
    RecheckTimer,
    gpus_for,
    log_rebalance,
    never_fits_line,
    scheduling_step,
    trial_request,
    update_waiting,
)
from master_lite.scheduler import GPU, Grant, PortAllocator, Scheduler
from master_lite.store import AllocationRow, CheckpointRow, TrialRow

logger = logging.getLogger("master_lite")

# A context tarball up to this size is unpacked on the loop at launch (a few hundred members
# at most: milliseconds); a larger one in a worker thread, since its member count, and so
# the time to unpack it, can be large (100k empty files gzip to about 1 MiB).
INLINE_CONTEXT_BYTES = 16 * 1024


def allocation_id_for(trial_id: int, run_id: int) -> str:
    """The allocation id of a trial's run: `trial-<trial id>.<run id>`."""
    return f"trial-{trial_id}.{run_id}"


def _trial_of_allocation(allocation_id: str) -> int | None:
    """The trial id in a trial run's allocation id (None for other allocations)."""
    prefix, _, rest = allocation_id.partition("-")
    trial, dot, _run = rest.partition(".")
    return int(trial) if prefix == "trial" and dot and trial.isdigit() else None


class Runs:
    """Owns the live allocations, which trial holds which, and the preemption grace timers."""

    def __init__(
        self,
        shared: MasterState,
        *,
        views: Views,
        contexts: Contexts,
        logs: TrialLogs,
        scheduler: Scheduler,
        gpus: list[GPU],
        settings: RunSettings,
        accounts: TrialAccounts | None = None,
    ) -> None:
        self._shared = shared
        # Which Unix account runs each trial (MasterLite.run_trials_as; _accounts.py).
        self.accounts = accounts or TrialAccounts()
        self._views = views
        self._contexts = contexts
        self._logs = logs
        self.scheduler = scheduler
        self.gpus = gpus
        self.ports = PortAllocator()
        self.settings = settings
        self.runner: Runner = None  # type: ignore[assignment]  # attached by the master's start()
        self._log_writer: LogWriter = None  # type: ignore[assignment]
        self._master_url = ""
        self._allocations: dict[str, dict] = {}
        self._trial_allocation: dict[int, str] = {}
        # Trials whose granted slots wait for their context to unpack in a worker thread.
        self._preparing: dict[int, Grant] = {}
        self._recheck = RecheckTimer()  # wakes the scheduler when a run passes its min run time
        # Runs still alive when their grace ends are terminated (through the runner, once set).
        self._preemption = Preemption(
            shared,
            logs,
            settings,
            is_live=self._allocations.__contains__,
            runner=lambda: self.runner,
        )
        # What an exit means for its trial, and a launch that failed (wired by `connect`).
        self._on_run_ended: Callable[[RunEnded], None] = lambda ended: None
        self._on_launch_failed: Callable[[int], None] = lambda trial_id: None

    def connect(
        self,
        *,
        on_run_ended: Callable[[RunEnded], None],
        on_launch_failed: Callable[[int], None],
    ) -> None:
        """Wire the run-exits side (built after this part, since it schedules through it)."""
        self._on_run_ended = on_run_ended
        self._on_launch_failed = on_launch_failed

    def attach(self, runner: Runner, log_writer: LogWriter, master_url: str) -> None:
        """Start launching on `runner` (at the master's start); exits go through `log_writer`."""
        self.runner = runner
        self._log_writer = log_writer
        self._master_url = master_url
        runner.on_released(self._released)

    def _released(self, allocation_id: str) -> None:
        """Runner callback (any thread): a failed trial's kept kernel is gone (keep_alive ran
        out, or released). Its trial's `kernel_kept` turns false: tell the views, whose Debug in
        console button must go, on the loop."""
        trial_id = _trial_of_allocation(allocation_id)
        if trial_id is None or self._shared.closed:
            return
        try:
            self._shared.loop.call_soon_threadsafe(self._publish_trial, trial_id)
        except RuntimeError:  # the loop is closed: the master is gone
            pass

    def _publish_trial(self, trial_id: int) -> None:
        if self._shared.closed:
            return
        try:
            self._views.publish_trial(trial_id)
        except errors.NotFound:  # deleted with its experiment meanwhile
            pass

    def kernel_kept(self, trial_id: int, run_id: int) -> bool:
        """Whether the trial's run `run_id` ended and its kernel is kept for post-mortem."""
        runner = getattr(self, "runner", None)
        if runner is None:
            return False
        try:
            return runner.holds(allocation_id_for(trial_id, run_id))
        except KeyError:  # no runner owns it: nothing kept
            return False

    # -- queries ------------------------------------------------------------------------------
    def allocation_id_of(self, trial_id: int) -> str | None:
        """The id of the trial's live allocation, if it runs."""
        return self._trial_allocation.get(trial_id)

    def allocation_of_trial(self, trial_id: int) -> dict | None:
        """The trial's live allocation (id, slot_ids, preempt, …), if it runs."""
        allocation_id = self._trial_allocation.get(trial_id)
        return self._allocations.get(allocation_id) if allocation_id else None

    def is_running(self, trial_id: int) -> bool:
        """Whether the trial has a live allocation (a run that has not exited yet)."""
        return trial_id in self._trial_allocation

    def live_allocations(self) -> list[str]:
        """Ids of every live allocation."""
        return list(self._allocations)

    def allocation_row(self, allocation_id: str) -> AllocationRow:
        """The allocation's stored row; NotFound if there is none."""
        row = self._shared.store.allocations.get(allocation_id)
        if row is None:
            raise errors.NotFound(f"allocation {allocation_id} not found")
        return row

    def trial_kernel(self, trial_id: int) -> dict:
        """How to attach to a kernel trial's kernel (running, or kept after a failure)."""
        return trial_kernel(self._views, self.runner, trial_id)

    def resources(self) -> dict:
        """The slots, which allocation holds each, and the GPUs."""
        slot_owner: dict[int, dict] = {}
        for allocation in self._allocations.values():
            for slot in allocation["slot_ids"]:
                slot_owner[slot] = allocation
        by_index = {g.index: g for g in self.gpus}
        pool_of = {s: name for name, ids in self.scheduler.pools.items() for s in ids}
        slots = []
        for slot in self.scheduler.slot_ids:
            gpu = by_index.get(slot)
            owner = slot_owner.get(slot)
            slots.append(
                {
                    "id": slot,
                    "type": "gpu" if gpu or self.scheduler.slot_type(slot) == "cuda" else "cpu",
                    "pool": pool_of.get(slot),
                    "gpu": gpu.to_json() if gpu else None,
                    "allocation_id": owner["id"] if owner else None,
                    "trial_id": owner["trial_id"] if owner else None,
                }
            )
        return {"slots": slots, "gpus": [g.to_json() for g in self.gpus]}

    # -- scheduling ---------------------------------------------------------------------------
    def schedule_trial(self, trial_id: int) -> None:
        """Ask for slots if the trial should run and neither runs nor waits already."""
        trial = self._views.trial_row(trial_id)
        experiment = self._views.experiment_row(trial.experiment_id)
        if experiment.state != ExperimentState.ACTIVE or trial.state != TrialState.ACTIVE:
            return
        key = f"trial-{trial_id}"
        if (
            trial_id in self._trial_allocation
            or trial_id in self._preparing
            or self.scheduler.is_pending(key)
        ):
            return
        request = trial_request(self._shared, self.scheduler, trial_id, experiment)
        never = never_fits_line(self.scheduler, trial_id, request)
        if never:
            self._logs.master_log(trial_id, never)
        self.scheduler.request(request)
        self.run_scheduler()

    def reprioritize(self, exp_id: int) -> None:
        """The experiment's `resources` (priority, max_slots, weight, pool) or queue position
        changed: its waiting trials wait with the new values; what that lets start, starts."""
        probe = trial_request(self._shared, self.scheduler, 0, self._views.experiment_row(exp_id))
        update_waiting(self.scheduler, probe)
        self.run_scheduler()

    def cancel_request(self, trial_id: int) -> None:
        """Withdraw the trial's request for slots, if it waits for some."""
        self.scheduler.cancel(f"trial-{trial_id}")

    def run_scheduler(self) -> None:
        """Launch what the scheduler grants; inside a transaction, once it has committed."""
        if self._shared.stopping or self._shared.closed:
            return
        if self._shared.in_atomic:
            # Launching is a side effect the store cannot roll back.
            self._shared.after_commit(self.run_scheduler)
            return
        step = scheduling_step(self._shared, self.scheduler)  # with slot-hours per day
        self._recheck.arm(self._shared.loop, step.recheck_in, self.run_scheduler)
        for key in step.preempt:  # the policy's rebalancing: through the preemption path
            trial_id = int(key.split("-", 1)[1])
            allocation = self.allocation_of_trial(trial_id)
            if allocation is not None:
                log_rebalance(self._logs, self.scheduler, trial_id, key)
                self._preemption.preempt(allocation, REBALANCE)
        for grant in step.grants:
            trial_id = int(grant.request.allocation_key.split("-", 1)[1])
            try:
                self._launch(trial_id, grant)
            except Exception as exc:  # the trial fails; the master keeps going
                self.scheduler.release(grant.request.allocation_key)
                self._logs.master_log(trial_id, f"could not start trial {trial_id}: {exc}")
                self._on_launch_failed(trial_id)

    def _launch(self, trial_id: int, grant: Grant, *, prepared: bool = False) -> None:
        store = self._shared.store
        trial = self._views.trial_row(trial_id)
        experiment = self._views.experiment_row(trial.experiment_id)
        config = experiment.config
        run_id = trial.run_id + 1
        allocation_id = allocation_id_for(trial_id, run_id)
        work_dir = self._shared.root_dir / "trials" / str(trial_id) / f"run-{run_id}"
        # Before anything is made: a user without a Unix account (and no fallback) fails here.
        run_as = self.accounts.run_as(experiment.owner_id, self._shared.store.users.get)
        python = self.accounts.python_for(run_as)
        if not prepared:
            context = experiment.context_hash
            if context and self._contexts.stored_size(context) > INLINE_CONTEXT_BYTES:
                self._prepare(trial_id, grant, self._contexts.tarball_path(context), work_dir)
                return
            if work_dir.exists():  # left by a master that crashed before recording this run
                shutil.rmtree(work_dir)
            work_dir.mkdir(parents=True)
            if context:
                self._contexts.unpack(context, work_dir)
        if run_as is not None:
            hand_over(work_dir, run_as)
            in_image = bool((config.get("environment") or {}).get("image"))
            prepare_storage(config, run_as, experiment.id, trial_id, container=in_image)
        token = _auth.new_trial_token()
        slot_ids = list(grant.slot_ids)
        gpus = gpus_for(self.gpus, slot_ids)  # none for the slots of a CPU pool
        resume_steps = steps_to_resume(trial, self._resume_checkpoint(trial))
        from_scratch: dict = {}
        if run_id > 1 and trial.steps_completed > 0 and resume_steps == 0:
            # A restart, an Activate or an ASHA promotion of a trial that trained but saved
            # no checkpoint: its code starts from step 0 again. Said once, where people look;
            # its steps and progress start over too, or "Steps" would keep the old run's count
            # beside the new run's progress.
            self._logs.master_log(
                trial_id,
                f"restarting from scratch: no checkpoint (the trial trained "
                f"{trial.steps_completed} steps but saved none to resume from; save checkpoints "
                "with core_context.checkpoint and resume from get_cluster_info().latest_checkpoint)",
            )
            from_scratch = {"steps_completed": 0, "progress": 0.0}
        own_env = trial_environment(
            trial=trial,
            experiment=experiment,
            allocation_id=allocation_id,
            run_id=run_id,
            token=token,
            slot_ids=slot_ids,
            gpus=gpus,
            checkpoint_steps=resume_steps,
            master_url=self._master_url,
            cluster_id=self.settings.cluster_id,
            ports=self.ports.trial_ports(allocation_id, live=self._allocations),
        )
        image = container_image(config, gpu=bool(gpus))
        stand_in = self.runner.image_stand_in(image) if image else None
        if stand_in:  # Determined's own image, not to be had here: a host process instead
            image = None
            self._logs.master_log(trial_id, stand_in)
        keras_env, keras_line = keras_environment(work_dir, own_env, in_container=image is not None)
        own_env.update(keras_env)
        if keras_line:
            self._logs.master_log(trial_id, keras_line)
        argv, shown = run_argv(config.get("entrypoint") or "", work_dir, image)
        if (config.get("environment") or {}).get("kernel") is not None:
            shown = f"{config.get('entrypoint')} (in a Jupyter kernel)"
        with store.transaction():
            # A new run: the previous run's notebook error no longer describes the trial.
            self._shared.trial_states.start_run(
                trial_id, run_id=run_id, notebook_error=None, **from_scratch
            )
            store.allocations.start(
                allocation_id,
                trial_id=trial_id,
                run_id=run_id,
                slot_ids=slot_ids,
                token_hash=_auth.hash_token(token),
            )
        self._allocations[allocation_id] = {
            "id": allocation_id,
            "trial_id": trial_id,
            "experiment_id": experiment.id,
            "slot_ids": slot_ids,
            "preempt": False,
            "acked": False,
            "intent": None,
            "key": grant.request.allocation_key,
            "signalled": {},
            "container": image is not None,
        }
        self._trial_allocation[trial_id] = allocation_id
        self._logs.master_log(trial_id, f"starting {allocation_id} on slots {slot_ids}: {shown}")
        try:
            pid = self.runner.launch(
                LaunchSpec(
                    allocation_id=allocation_id,
                    trial_id=trial_id,
                    argv=argv,
                    env=own_env,
                    work_dir=work_dir,
                    image=image,
                    config=config,
                    restore_from=self._restore_dir(trial),
                    hidden=self._shared.hidden_from_trials,
                    run_as=run_as,
                    python=python,
                )
            )
        except (OSError, NotImplementedError) as exc:
            target = repr(argv[0]) if image is None else f"a container of {image}"
            self._logs.master_log(trial_id, f"could not start {target}: {exc}")
            self._shared.loop.call_soon(self._on_exit, allocation_id, 127)
            return
        store.allocations.set_process(allocation_id, pid)
        self._views.publish_trial(trial_id)

    def _prepare(self, trial_id: int, grant: Grant, tarball: Path, work_dir: Path) -> None:
        """Unpack the run's context in a worker thread (its slots stay granted meanwhile);
        the launch goes on on the loop once it is done (`_prepared`)."""
        self._preparing[trial_id] = grant
        future = self._shared.loop.run_in_executor(
            None, self._contexts.unpack_file, tarball, work_dir
        )
        future.add_done_callback(lambda done: self._prepared(trial_id, grant, done))

    def _prepared(self, trial_id: int, grant: Grant, done: asyncio.Future) -> None:
        """The context is unpacked (or failed to): launch, unless the trial stopped wanting
        these slots meanwhile (killed, paused, deleted: its grant was cancelled)."""
        self._preparing.pop(trial_id, None)
        if done.cancelled() or self._shared.stopping or self._shared.closed:
            return  # the master stops: the trial is scheduled again at its next start
        key = grant.request.allocation_key
        held = self.scheduler.granted().get(key) is grant
        try:
            trial = self._views.trial_row(trial_id)
            wanted = (
                trial.state == TrialState.ACTIVE
                and self._views.experiment_row(trial.experiment_id).state == ExperimentState.ACTIVE
            )
        except errors.NotFound:  # deleted with its experiment
            wanted = False
        if not held or not wanted:
            if held:
                self.scheduler.release(key)
                self.run_scheduler()
            elif wanted:  # paused and activated again while unpacking: ask anew
                self.schedule_trial(trial_id)
            return
        error = done.exception()
        try:
            if error is not None:
                raise error
            self._launch(trial_id, grant, prepared=True)
        except Exception as exc:  # the trial fails; the master keeps going
            self.scheduler.release(key)
            self._logs.master_log(trial_id, f"could not start trial {trial_id}: {exc}")
            self._on_launch_failed(trial_id)
            self.run_scheduler()

    def _restore_dir(self, trial: TrialRow) -> Path | None:
        """The directory of the checkpoint the run restores from, when it is a checkpoint
        directory of the master's storage (a container runner mounts only that one)."""
        row = self._resume_checkpoint(trial)
        if row is None or row.state != "COMPLETED" or not row.path:
            return None
        # checkpoints.owned_checkpoint_dir's rule (that package imports this one): a
        # uuid-named real directory under a storage root, whatever an old record says.
        path = Path(row.path)
        if path.name != row.uuid or not path.is_absolute() or path.is_symlink():
            return None
        resolved = path.resolve()
        roots = self._shared.storage_roots
        if resolved.name != row.uuid or not any(resolved.parent.is_relative_to(r) for r in roots):
            return None
        return resolved

    def _resume_checkpoint(self, trial: TrialRow) -> CheckpointRow | None:
        checkpoint = trial.latest_checkpoint
        if not checkpoint:
            return None
        return self._shared.store.checkpoints.get(checkpoint)

    # -- preemption (the grace timers are the preemption side's, `_preemption.py`) ------------
    def preempt(self, allocation_id: str, intent: str) -> None:
        """Ask the run to checkpoint and exit; terminate it if it ignores us for too long."""
        allocation = self._allocations.get(allocation_id)
        if allocation is not None:
            self.scheduler.mark_stopping(allocation["key"])  # its slots are coming free
            self._preemption.preempt(allocation, intent)

    def kill(self, allocation_id: str, intent: str, because: str) -> None:
        """SIGKILL the run now; `because` is what its exit summary will say."""
        allocation = self._allocations.get(allocation_id)
        if allocation is not None:
            self.scheduler.mark_stopping(allocation["key"])
            self._preemption.kill(allocation, intent, because)

    async def wait_preemption(self, allocation_id: str, timeout: float) -> bool:
        """True once the run should exit (preempted, or already over); False after `timeout`."""
        loop = self._shared.loop
        deadline = loop.time() + max(float(timeout), 0.0)
        while True:
            allocation = self._allocations.get(allocation_id)
            if allocation is None:
                self.allocation_row(allocation_id)  # NotFound for unknown ids
                return True  # the run is over: whoever still asks should stop
            if allocation["preempt"]:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self._shared.wait_changed(("allocation", allocation_id), remaining)

    def preemption_reason(self, allocation_id: str) -> dict:
        """Why a preempted run is asked to exit and how long it has: the intent and the grace.

        An extension of the preemption answer (Determined's is only `preempt`), so the harness
        can tell a loop that ignores the signal what is going on (`_preempt.py`, `_on_report`).
        """
        allocation = self._allocations.get(allocation_id)
        intent = allocation["intent"] if allocation is not None else None
        return {"reason": intent, "grace_seconds": self.settings.preemption_grace_seconds}

    def ack_preemption(self, allocation_id: str) -> None:
        """The run heard it must exit (or has no more work) and will."""
        self.allocation_row(allocation_id)
        allocation = self._allocations.get(allocation_id)
        if allocation is not None:
            allocation["acked"] = True
        self._shared.store.allocations.mark_preempt_acked(allocation_id)

    # -- exits --------------------------------------------------------------------------------
    def exit_observed(self, allocation_id: str, exit_code: int) -> None:
        """Runner callback (waiter thread): the run's process exited."""
        loop = self._shared.loop

        def hand_to_loop() -> None:
            try:
                loop.call_soon_threadsafe(self._on_exit, allocation_id, exit_code)
            except RuntimeError:  # the loop is closed: the master is gone
                pass

        # Through the log writer, so that the exit reaches the loop only after the run's last
        # lines are stored.
        self._log_writer.after_pending(hand_to_loop)

    def _on_exit(self, allocation_id: str, exit_code: int) -> None:
        if self._shared.closed:
            return
        allocation = self._allocations.pop(allocation_id, None)
        if allocation is None:
            return
        self._preemption.cancel_timer(allocation_id)
        trial_id = allocation["trial_id"]
        self._trial_allocation.pop(trial_id, None)
        self.scheduler.release(allocation["key"])
        store = self._shared.store
        try:
            # The run's end, the trial's new state and what the searcher makes of it commit
            # together: a crash in between would otherwise lose the searcher's event.
            with self._shared.atomic():
                store.allocations.end(allocation_id, exit_code=exit_code)
                store.allocations.revoke_tokens(allocation_id)
                sig, lost = signal_of(exit_code), self.runner.lost_cause(allocation_id)
                because = lost or (allocation["signalled"].get(int(sig)) if sig else None)
                summary = exit_summary(exit_code, signalled_because=because)
                store.trials.set_exit_summary(trial_id, summary)
                self._logs.master_log(
                    trial_id,
                    f"{allocation_id} exited with code {exit_code}"
                    + (f": {summary}" if sig is not None else ""),
                )
                determined_line = determined_exit_line(
                    exit_code,
                    container=allocation.get("container", False),
                    killed=because is not None,
                )
                if determined_line:  # beside ours: Determined's words, which its users grep
                    self._logs.master_log(trial_id, determined_line)
                self._on_run_ended(
                    RunEnded(
                        allocation_id=allocation_id,
                        trial_id=trial_id,
                        intent=allocation["intent"] or ("cluster-lost" if lost else None),
                        acked=allocation["acked"],
                        exit_code=exit_code,
                    )
                )
        except Exception:  # keep scheduling the others; the traceback goes to the master log
            logger.exception("while handling the exit of %s", allocation_id)
        self._shared.notify(("allocation", allocation_id))
        self.run_scheduler()

    async def stop_all(self, *, pause_running: bool) -> None:
        """Preempt (or kill) every run and wait until they exited, killing what lingers."""
        self._recheck.cancel()
        for allocation_id in list(self._allocations):
            if pause_running:
                self.preempt(allocation_id, "master-stop")
            else:
                self.kill(
                    allocation_id, "master-stop", "killed by the master (it was shutting down)"
                )
        loop = self._shared.loop
        settings = self.settings
        deadline = (
            loop.time() + settings.preemption_grace_seconds + settings.terminate_grace_seconds + 5
        )
        while self._allocations and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for allocation_id in list(self._allocations):  # still there: out of patience
            self.kill(
                allocation_id,
                "master-stop",
                "killed by the master (it was shutting down, and the run "
                "did not exit after the preemption signal)",
            )
        while self._allocations and loop.time() < deadline + 5:
            await asyncio.sleep(0.05)
        self._preemption.cancel_all_timers()


__all__ = ["Runs"]
