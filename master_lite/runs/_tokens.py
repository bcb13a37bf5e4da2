"""Who holds a token: the user (the master's own token) or a live run of a trial.

Tokens of trial runs are stored hashed (`trial_tokens`); nothing here keeps state.
"""

from __future__ import annotations

from determined.common.states import TERMINAL_TRIAL_STATES
from master_lite._core import _auth
from master_lite.store import Store


def authenticate(store: Store, token: str | None, *, user_token: str) -> _auth.Principal | None:
    """Who holds `token`: the user (the master's token) or a live run of a trial."""
    if not token:
        return None
    if _auth.tokens_equal(token, user_token):
        return _auth.UserPrincipal()
    token_hash = _auth.hash_token(token)
    row = store.allocations.token(token_hash)
    if row is None:
        return _unmanaged_principal(store, token_hash)
    trial = store.trials.get(row.trial_id)
    if trial is None:  # a token outlives its trial only until the trial's row is gone
        return None
    return _auth.TrialPrincipal(
        trial_id=row.trial_id,
        experiment_id=trial.experiment_id,
        allocation_id=row.allocation_id,
    )


def _unmanaged_principal(store: Store, token_hash: str) -> _auth.TrialPrincipal | None:
    """The kernel of a live unmanaged trial (core_v2): its token works while the trial is live."""
    row = store.unmanaged.by_token(token_hash)
    if row is None:
        return None
    trial = store.trials.get(row.trial_id)
    if trial is None or trial.state in TERMINAL_TRIAL_STATES:
        return None
    return _auth.TrialPrincipal(
        trial_id=row.trial_id,
        experiment_id=row.experiment_id,
        allocation_id=f"unmanaged-{row.trial_id}",
    )
