"""The one owner of trial and experiment state (like Determined's trial and experiment actors).

Every write of a trial's or an experiment's `state` column, and of its companions (the end time;
a trial's exit code and final progress), is a named transition here that checks the state
machine first. No other code writes those columns: the store's generic `update()` refuses them
(`Row.STATE_COLUMNS`), and tests/master_lite/test_state_owner.py fails on any `set_state`,
state-setting `create` or state `update` outside this module.

The machine, for trials and experiments alike: a live entity (not COMPLETED, CANCELED or ERROR)
may move to any state its named transition allows; an ended one only comes back through
`reopen` (a searcher promoting a completed trial, a kernel run resuming by its external ids).
Each transition answers the state it left, so callers decide what to tell (events) themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from determined.common.states import (
    TERMINAL_EXPERIMENT_STATES,
    TERMINAL_TRIAL_STATES,
    ExperimentState,
    TrialState,
)
from master_lite import errors
from master_lite.store import Store

_STOPPING_TRIAL = frozenset(
    {
        TrialState.STOPPING_CANCELED,
        TrialState.STOPPING_KILLED,
        TrialState.STOPPING_COMPLETED,
        TrialState.STOPPING_ERROR,
    }
)
_STOPPING_EXPERIMENT = frozenset(
    {
        ExperimentState.STOPPING_CANCELED,
        ExperimentState.STOPPING_COMPLETED,
        ExperimentState.STOPPING_ERROR,
    }
)


class IllegalTransition(errors.Conflict):
    """A transition the state machine does not allow from the entity's current state."""


class TrialStates:
    """Every change of a trial's state: creation, runs, pauses, stops, ends, reopening."""

    def __init__(self, store: Callable[[], Store]) -> None:
        # The store is opened after the parts are built: ask for it on each use.
        self._store = store

    def _current(self, trial_id: int) -> TrialState:
        trial = self._store().trials.get(trial_id)
        if trial is None:
            raise errors.NotFound(f"trial {trial_id} not found")
        return TrialState(trial.state)

    def _move(self, trial_id: int, name: str, to: TrialState) -> TrialState:
        """Check that `name` may take the trial from its state to `to` (an ended trial moves
        only by `reopen`); the state it leaves."""
        current = self._current(trial_id)
        if current in TERMINAL_TRIAL_STATES:
            raise IllegalTransition(f"trial {trial_id}: cannot {name} a {current} trial (to {to})")
        return current

    def create(self, *, paused: bool, **values: Any) -> int:
        """A new trial, ACTIVE (or PAUSED in a paused experiment); its id."""
        state = TrialState.PAUSED if paused else TrialState.ACTIVE
        return self._store().trials.create(state=str(state), **values)

    def start_run(self, trial_id: int, **companions: Any) -> TrialState:
        """A run of the trial launches: it is ACTIVE (`companions`: its run id, ...)."""
        left = self._move(trial_id, "start a run of", TrialState.ACTIVE)
        self._store().trials.set_state(trial_id, TrialState.ACTIVE, **companions)
        return left

    def pause(self, trial_id: int) -> TrialState:
        """The trial waits (its experiment paused, or its run was preempted to pause)."""
        left = self._move(trial_id, "pause", TrialState.PAUSED)
        self._store().trials.set_state(trial_id, TrialState.PAUSED)
        return left

    def activate(self, trial_id: int) -> TrialState:
        """The trial may run again (its experiment was activated, or it is requeued)."""
        left = self._move(trial_id, "activate", TrialState.ACTIVE)
        self._store().trials.set_state(trial_id, TrialState.ACTIVE)
        return left

    def stop(self, trial_id: int, stopping: TrialState) -> TrialState:
        """The trial's run was asked to stop; its exit ends the trial (`stopping`: a STOPPING_*
        state saying how)."""
        if stopping not in _STOPPING_TRIAL:
            raise ValueError(f"not a stopping state: {stopping}")
        left = self._move(trial_id, "stop", stopping)
        self._store().trials.set_state(trial_id, stopping)
        return left

    def end(
        self, trial_id: int, final: TrialState, *, end_time: float, **companions: Any
    ) -> TrialState:
        """The trial's final state (COMPLETED, CANCELED or ERROR), once: an ended trial does not
        end again. A completed trial's progress is 1."""
        if final not in TERMINAL_TRIAL_STATES:
            raise ValueError(f"not a final state: {final}")
        left = self._move(trial_id, "end", final)
        if final == TrialState.COMPLETED:
            companions["progress"] = 1.0
        self._store().trials.set_state(trial_id, final, end_time=end_time, **companions)
        return left

    def reopen(
        self, trial_id: int, *, allowed: frozenset[TrialState], **companions: Any
    ) -> TrialState:
        """An ended trial in `allowed` runs again: ACTIVE, no end time (`companions`: what else
        its new run changes). A live trial is made ACTIVE the same way."""
        current = self._current(trial_id)
        if current in TERMINAL_TRIAL_STATES and current not in allowed:
            raise IllegalTransition(f"trial {trial_id}: cannot reopen a {current} trial")
        self._store().trials.set_state(trial_id, TrialState.ACTIVE, end_time=None, **companions)
        return current


class ExperimentStates:
    """Every change of an experiment's state: creation, pause, activation, stopping, ending,
    reopening."""

    def __init__(self, store: Callable[[], Store]) -> None:
        self._store = store

    def _current(self, exp_id: int) -> ExperimentState:
        experiment = self._store().experiments.get(exp_id)
        if experiment is None:
            raise errors.NotFound(f"experiment {exp_id} not found")
        return ExperimentState(experiment.state)

    def _move(
        self,
        exp_id: int,
        name: str,
        to: ExperimentState,
        allowed: frozenset[ExperimentState] | None = None,
    ) -> ExperimentState:
        current = self._current(exp_id)
        if current in TERMINAL_EXPERIMENT_STATES or (
            allowed is not None and current not in allowed
        ):
            raise IllegalTransition(
                f"experiment {exp_id}: cannot {name} a {current} experiment (to {to})"
            )
        return current

    def create(self, *, paused: bool, **values: Any) -> int:
        """A new experiment, ACTIVE (or PAUSED); its id."""
        state = ExperimentState.PAUSED if paused else ExperimentState.ACTIVE
        return self._store().experiments.create(state=str(state), **values)

    def pause(self, exp_id: int) -> ExperimentState:
        """An ACTIVE experiment pauses."""
        to = ExperimentState.PAUSED
        left = self._move(exp_id, "pause", to, frozenset({ExperimentState.ACTIVE, to}))
        self._store().experiments.set_state(exp_id, to)
        return left

    def activate(self, exp_id: int) -> ExperimentState:
        """A PAUSED experiment runs again."""
        to = ExperimentState.ACTIVE
        left = self._move(exp_id, "activate", to, frozenset({ExperimentState.PAUSED, to}))
        self._store().experiments.set_state(exp_id, to)
        return left

    def stop(self, exp_id: int, stopping: ExperimentState) -> ExperimentState:
        """The experiment is stopping (`stopping`: a STOPPING_* state); its end follows when
        nothing of it runs any more."""
        if stopping not in _STOPPING_EXPERIMENT:
            raise ValueError(f"not a stopping state: {stopping}")
        left = self._move(exp_id, "stop", stopping)
        self._store().experiments.set_state(exp_id, stopping)
        return left

    def end(self, exp_id: int, final: ExperimentState, *, end_time: float) -> ExperimentState:
        """The experiment's final state (COMPLETED, CANCELED or ERROR), once."""
        if final not in TERMINAL_EXPERIMENT_STATES:
            raise ValueError(f"not a final state: {final}")
        left = self._move(exp_id, "end", final)
        self._store().experiments.set_state(exp_id, final, end_time=end_time)
        return left

    def reopen(self, exp_id: int, **companions: Any) -> ExperimentState:
        """An experiment of kernel runs (`config.unmanaged`) is live again when one of them
        resumes: ACTIVE, no end time (`companions`: what else comes back, e.g. not archived).
        A managed experiment never comes back."""
        experiment = self._store().experiments.get(exp_id)
        if experiment is None:
            raise errors.NotFound(f"experiment {exp_id} not found")
        current = ExperimentState(experiment.state)
        if not experiment.config.get("unmanaged"):
            raise IllegalTransition(
                f"experiment {exp_id}: only an experiment of kernel runs reopens ({current})"
            )
        self._store().experiments.set_state(
            exp_id, ExperimentState.ACTIVE, end_time=None, **companions
        )
        return current


__all__ = ["ExperimentStates", "IllegalTransition", "TrialStates"]
