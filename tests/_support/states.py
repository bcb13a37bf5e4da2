"""The terminal-state sets, as plain strings (what the REST API returns).

Taken from `determined.common.states` so that the tests and the master agree by construction.
"""

from __future__ import annotations

from determined.common import states as _states

TERMINAL_EXPERIMENT_STATES: frozenset[str] = frozenset(
    state.value for state in _states.TERMINAL_EXPERIMENT_STATES
)
TERMINAL_TRIAL_STATES: frozenset[str] = frozenset(
    state.value for state in _states.TERMINAL_TRIAL_STATES
)
