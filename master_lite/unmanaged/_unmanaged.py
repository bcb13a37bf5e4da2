"""The unmanaged part: trials that train where the master does not run them (a Jupyter kernel).

Determined calls them unmanaged (`det.experimental.core_v2`): the master schedules nothing for
them, holds no slots and starts no process, but stores their metrics, checkpoints and logs like
any trial's. A run opens its trial by external ids (the same ids later resume the same trial),
gets a token scoped to that trial, and renews a lease by heartbeat. A lease past due means the
kernel died without closing (SIGKILL, a crashed machine): the trial ends as ERROR, so nothing
stays ACTIVE forever. Deadlines are wall-clock times in the store, so a restarted master keeps
them; the clock is injected so tests drive expiry without sleeping.

A busy master never ends a live run: heartbeats that arrive while the loop is busy (a long
request, a slow disk) wait in its queue, so the lease timer, which may run first when the loop
comes back, cannot tell a dead kernel from a queued heartbeat. A ticker watches the loop while
leases are live; after a gap of more than `LOOP_STALL_SECONDS` every lease gets a full lease
period of a responsive loop before it can expire (`observe_loop`).
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Callable

from determined.common.states import (
    TERMINAL_TRIAL_STATES,
    ExperimentState,
    TrialState,
)
from master_lite import errors
from master_lite._core import _auth
from master_lite._core._secrets import redact_config
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.checkpoints import storage_problem
from master_lite.experiments._experiments import Experiments
from master_lite.reports._logs import TrialLogs
from master_lite.store import TrialRow, UnmanagedTrialRow
from master_lite.unmanaged._config import unmanaged_config
from master_lite.workspaces import place_experiment

# While leases are live the loop is watched by a tick this often; a gap between two looks at
# the loop longer than LOOP_STALL_SECONDS means it was busy (not that a kernel died).
LOOP_TICK_SECONDS = 0.5
LOOP_STALL_SECONDS = 2.0

# How a run may end itself (`close`), and what each makes of the trial.
CLOSE_STATES = {
    "COMPLETED": TrialState.COMPLETED,
    "CANCELED": TrialState.CANCELED,
    "ERROR": TrialState.ERROR,
}
MIN_LEASE_SECONDS = 0.5
MAX_LEASE_SECONDS = 24 * 3600.0
# The log times a run may send: what a stored log line's time is read back as (a UTC date
# between 1970 and the year 9999); anything else would make the trial's logs unreadable.
MAX_LOG_TIME = 253402300799.0


class UnmanagedRuns:
    """Opens, renews, logs and ends unmanaged trials; expires the leases of dead kernels."""

    def __init__(
        self,
        shared: MasterState,
        *,
        views: Views,
        logs: TrialLogs,
        experiments: Experiments,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._shared = shared
        self._views = views
        self._logs = logs
        self._experiments = experiments
        self._clock = clock
        self._timer: asyncio.TimerHandle | None = None
        self._ticker: asyncio.TimerHandle | None = None
        # When the loop was last seen running, and since when it has run without a stall
        # (-inf: no stall seen; `start()` sets it: no master ran before).
        self._loop_seen: float | None = None
        self._responsive_since = -math.inf
        # Trials whose kernel holds a lease (kept in memory: trial JSON asks per trial).
        self._live: set[int] = set()

    # -- opening and resuming -----------------------------------------------------------------
    def open_run(self, body: dict, *, owner_id: int = _auth.OWNER_ID, admin: bool = True) -> dict:
        """Create (or resume, by external ids) the run's experiment and trial; the trial's facts
        and a token for its reports: `{experiment_id, trial_id, token, resumed, ...}`. A new
        experiment belongs to `owner_id`; another user's run is resumed by its owner or an
        `admin` only (Forbidden; docs/team.md)."""
        given = body.get("lease_seconds")
        lease = 60.0 if given is None else float(given)  # 0 is out of range, not "default"
        if not MIN_LEASE_SECONDS <= lease <= MAX_LEASE_SECONDS:
            raise errors.InvalidRequest(
                f"lease_seconds: {lease} is out of range [{MIN_LEASE_SECONDS}, {MAX_LEASE_SECONDS}]"
            )
        external_exp = str(body.get("external_experiment_id") or "") or secrets.token_hex(8)
        external_trial = str(body.get("external_trial_id") or "") or secrets.token_hex(8)
        token = _auth.new_trial_token()
        store = self._shared.store
        with self._shared.atomic():
            existing = store.unmanaged.by_external_ids(external_exp, external_trial)
            known = store.unmanaged.experiment_of_external(external_exp)
            if known is not None and not admin:
                self._check_owner(known, owner_id)
            if existing is not None:
                trial = self._resume(existing, lease, token, str(body.get("host") or ""))
                resumed = True
            else:
                trial = self._create(body, external_exp, external_trial, lease, token, owner_id)
                resumed = False
        self._live.add(trial.id)
        self._arm_timer()
        experiment = self._views.experiment_row(trial.experiment_id)
        return {
            "experiment_id": trial.experiment_id,
            "trial_id": trial.id,
            "trial_run_id": trial.run_id,
            "token": token,
            "resumed": resumed,
            "external_experiment_id": external_exp,
            "external_trial_id": external_trial,
            "hparams": trial.hparams,
            "trial_seed": trial.seed,
            "steps_completed": trial.steps_completed,
            "latest_checkpoint": trial.latest_checkpoint,
            "lease_seconds": lease,
            "config": redact_config(experiment.config),  # secrets stay in the store
        }

    def _check_owner(self, exp_id: int, owner_id: int) -> None:
        owner = self._views.experiment_row(exp_id).owner_id
        if owner != owner_id:
            name = self._shared.store.users.names().get(owner, f"user {owner}")
            raise errors.Forbidden(
                f"experiment {exp_id} belongs to {name}: only {name} or an admin may "
                "resume its runs"
            )

    def _create(
        self,
        body: dict,
        external_exp: str,
        external_trial: str,
        lease: float,
        token: str,
        owner_id: int = _auth.OWNER_ID,
    ) -> TrialRow:
        store = self._shared.store
        exp_id = store.unmanaged.experiment_of_external(external_exp)
        if exp_id is None:
            config = unmanaged_config(
                body,
                default_checkpoint_storage={
                    "type": "shared_fs",
                    "host_path": str(self._shared.root_dir / "checkpoints"),
                    "storage_path": ".",
                },
            )
            # The master serves and deletes what lies in checkpoint storage: a run may put it
            # only where the master's configuration allows (issue 26).
            problem = storage_problem(config["checkpoint_storage"], self._shared.storage_roots)
            if problem:
                raise errors.InvalidRequest(f"invalid run config: {problem}", [problem])
            exp_id = self._shared.experiment_states.create(
                paused=False,
                name=config["name"],
                description=config.get("description") or "",
                labels=list(config.get("labels") or []),
                archived=False,
                config=config,
                original_config=None,
                start_time=self._clock(),
                owner_id=owner_id,
                project_id=place_experiment(store, config),  # its workspace/project names
            )
        else:
            self._reopen_experiment(exp_id)
        trial_id = self._shared.trial_states.create(
            paused=False,
            experiment_id=exp_id,
            request_id=store.trials.count(exp_id) + 1,
            hparams=dict(body.get("hparams") or {}),
            seed=secrets.randbelow(2**31),
            run_id=1,
            start_time=self._clock(),
        )
        store.unmanaged.create(
            trial_id=trial_id,
            experiment_id=exp_id,
            external_experiment_id=external_exp,
            external_trial_id=external_trial,
            token_hash=_auth.hash_token(token),
            lease_seconds=lease,
            lease_expires=self._clock() + lease,
            host=str(body.get("host") or ""),
        )
        self._logs.master_log(
            trial_id, f"run opened in a kernel ({body.get('host') or 'unknown host'})"
        )
        self._views.publish_experiment(exp_id)
        self._views.publish_trial(trial_id)
        return self._views.trial_row(trial_id)

    def _resume(self, row: UnmanagedTrialRow, lease: float, token: str, host: str) -> TrialRow:
        """The same trial continues: a new run id, a new token (the old kernel's stops working),
        ACTIVE again if it had ended."""
        store = self._shared.store
        trial = self._views.trial_row(row.trial_id)
        self._reopen_experiment(row.experiment_id)
        self._shared.trial_states.reopen(
            trial.id,
            allowed=TERMINAL_TRIAL_STATES,
            run_id=trial.run_id + 1,
            restarts=trial.restarts + (1 if trial.state == TrialState.ERROR else 0),  # failures
        )
        store.unmanaged.resume(
            row.trial_id,
            token_hash=_auth.hash_token(token),
            lease_seconds=lease,
            lease_expires=self._clock() + lease,
            host=host,
        )
        self._logs.master_log(
            trial.id,
            f"run resumed in a kernel ({host or 'unknown host'}) by its external ids "
            f"({row.external_experiment_id}, {row.external_trial_id}); it was {trial.state}",
        )
        self._views.publish_trial(trial.id)
        return self._views.trial_row(trial.id)

    def _reopen_experiment(self, exp_id: int) -> None:
        experiment = self._views.experiment_row(exp_id)
        if experiment.state != ExperimentState.ACTIVE:
            # Live again: not archived, and its checkpoints are collected again when it ends.
            self._shared.experiment_states.reopen(
                exp_id,
                archived=False,
                checkpoint_gc_done=False,
            )
            self._views.publish_experiment(exp_id)

    # -- while it runs ------------------------------------------------------------------------
    def live_row(self, trial_id: int) -> UnmanagedTrialRow:
        """The unmanaged trial's row while it is live; Conflict (naming why) once it ended."""
        row = self._shared.store.unmanaged.get(int(trial_id))
        if row is None:
            raise errors.NotFound(f"trial {trial_id} is not an unmanaged trial")
        trial = self._views.trial_row(trial_id)
        if row.lease_expires is None or trial.state in TERMINAL_TRIAL_STATES:
            raise errors.Conflict(
                f"trial {trial_id} is {trial.state}: its run was closed or its lease expired; "
                "nothing more is stored for it (resume it with core_v2.init and the same "
                "external ids)"
            )
        return row

    def check_reportable(self, trial_id: int) -> None:
        """Conflict once an unmanaged trial ended, as `live_row` (core_v2's close() sends what
        is queued first: no report of a live run is refused). Other trials: no check."""
        if trial_id not in self._live and self._shared.store.unmanaged.get(int(trial_id)):
            self.live_row(trial_id)

    def heartbeat(self, trial_id: int) -> dict:
        """Renew the run's lease; `{lease_expires}` (seconds since the epoch)."""
        row = self.live_row(trial_id)
        deadline = self._clock() + row.lease_seconds
        self._shared.store.unmanaged.renew_lease(row.trial_id, deadline)
        return {"lease_expires": deadline}

    def append_logs(self, trial_id: int, lines: list[dict]) -> int:
        """Store log lines the kernel captured from its cells; how many."""
        self.live_row(trial_id)
        records = []
        for index, item in enumerate(lines):
            stream = item.get("stream", "stdout")
            if stream not in ("stdout", "stderr"):
                raise errors.InvalidRequest(
                    f"logs[{index}].stream: expected 'stdout' or 'stderr', got {stream!r}"
                )
            records.append(
                (int(trial_id), 0, stream, self._log_time(item, index), str(item.get("line", "")))
            )
        self._logs.store_logs(records)
        return len(records)

    def _log_time(self, item: dict, index: int) -> float:
        """A log line's time: the one it carries (checked), or now."""
        when = item.get("time")
        if when is None:
            return self._clock()
        if (
            isinstance(when, bool)
            or not isinstance(when, int | float)
            or not math.isfinite(when)
            or not 0 <= when <= MAX_LOG_TIME
        ):
            problem = (
                f"logs[{index}].time: expected seconds since the epoch (0 to {MAX_LOG_TIME:.0f}), "
                f"got {when!r}; leave it out to stamp the line when it arrives"
            )
            raise errors.InvalidRequest(problem, [problem])
        return float(when)

    # -- ends ---------------------------------------------------------------------------------
    def close_run(self, trial_id: int, state: str, message: str | None = None) -> dict:
        """The kernel ends its run (`state`: COMPLETED, CANCELED or ERROR); the trial's JSON."""
        if state not in CLOSE_STATES:
            raise errors.InvalidRequest(
                f"state: expected one of {', '.join(CLOSE_STATES)}, got {state!r}"
            )
        self.live_row(trial_id)
        with self._shared.atomic():
            self._end(int(trial_id), CLOSE_STATES[state], message or f"run closed: {state}")
        return self._views.get_trial(trial_id)

    def observe_loop(self) -> None:
        """The loop runs now (the ticker and the lease timer say so). After a gap of more than
        LOOP_STALL_SECONDS since the last look, the loop was busy: heartbeats may wait in its
        queue, so every lease gets a full period from now before it can expire."""
        now = self._clock()
        if self._loop_seen is not None and now - self._loop_seen > LOOP_STALL_SECONDS:
            self._responsive_since = now
        self._loop_seen = now

    def _expiry(self, row: UnmanagedTrialRow) -> float | None:
        """When the row's lease ends: its deadline, but never before a full lease period of
        a responsive loop (None: no lease)."""
        if row.lease_expires is None:
            return None
        return max(row.lease_expires, self._responsive_since + row.lease_seconds)

    def expire_leases(self) -> list[int]:
        """End as ERROR every live trial whose lease is past due (and whose run had a full
        lease period of a responsive loop to renew it); their ids."""
        now = self._clock()
        expired = []
        for row in self._shared.store.unmanaged.live():
            expiry = self._expiry(row)
            if expiry is not None and expiry <= now:
                expired.append(row.trial_id)
                with self._shared.atomic():
                    self._end(
                        row.trial_id,
                        TrialState.ERROR,
                        f"the kernel running this trial sent no heartbeat for "
                        f"{row.lease_seconds:g} s (it died or lost the master): trial ended as "
                        "ERROR; resume it with core_v2.init and the same external ids",
                    )
        return expired

    def _end(self, trial_id: int, state: TrialState, message: str) -> None:
        store = self._shared.store
        trial = self._views.trial_row(trial_id)
        store.unmanaged.close_lease(trial_id)
        self._live.discard(trial_id)
        # A user's kill or cancel may have ended it already: then only the lease was left.
        if trial.state not in TERMINAL_TRIAL_STATES:
            self._logs.master_log(trial_id, message)
            store.trials.set_exit_summary(trial_id, None if state == "COMPLETED" else message)
            self._experiments.end_trial(trial, state, None)
        # An unmanaged experiment ends with its last live trial (Experiments' rule for it).
        self._experiments.maybe_finish_experiment(trial.experiment_id)

    def kernel_allocation(self, trial_id: int) -> dict | None:
        """What stands for a live unmanaged trial's allocation in its JSON (its kernel holds
        no slots, but it runs: RUNNING, not QUEUED); None for other trials."""
        if trial_id not in self._live:
            return None
        return {"id": f"unmanaged-{trial_id}", "slot_ids": [], "kernel": True}

    # -- the lease timer ----------------------------------------------------------------------
    def start(self) -> None:
        """Watch the leases in the store. No master ran before this start (a restart, a
        crash): whether a kernel renewed meanwhile cannot be known, so, as after a stall of
        the loop, every lease gets a full period from now before it can expire. A run whose
        master died and came back keeps its trial, and its reports, however long the master
        was down (docs/fault-tolerance.md); a kernel that died meanwhile ends a lease later."""
        self._live = {row.trial_id for row in self._shared.store.unmanaged.live()}
        self._responsive_since = self._clock()
        self.expire_leases()
        self._arm_timer()

    def stop(self) -> None:
        """Stop watching leases (the master stops; deadlines stay in the store)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._stop_ticker()

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        self._loop_seen = None  # the next look starts afresh, not as a stall

    def _tick(self) -> None:
        self._ticker = None
        if self._shared.closed:
            return
        self.observe_loop()
        self._ticker = self._shared.loop.call_later(LOOP_TICK_SECONDS, self._tick)

    def _arm_timer(self) -> None:
        """Wake at the earliest deadline (a heartbeat moves it later: then it just re-arms)."""
        loop = self._shared.loop
        if loop is None or self._shared.closed:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        expiries = [
            expiry
            for expiry in map(self._expiry, self._shared.store.unmanaged.live())
            if expiry is not None
        ]
        if not expiries:
            self._stop_ticker()
            return
        if self._ticker is None:
            self.observe_loop()
            self._ticker = loop.call_later(LOOP_TICK_SECONDS, self._tick)
        delay = max(0.0, min(expiries) - self._clock()) + 0.05
        self._timer = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._shared.closed:
            return
        # Look at the loop first: after a stall, the heartbeats queued behind it come next.
        self.observe_loop()
        self.expire_leases()
        self._arm_timer()


__all__ = ["CLOSE_STATES", "UnmanagedRuns"]
