"""Who holds a token: the user (the master's own token) or a live run of a trial.

Tokens of trial runs are stored hashed (`trial_tokens`); nothing here keeps state.
"""

from __future__ import annotations

from master_lite import _auth
from master_lite.store import Store


def authenticate(store: Store, token: str | None, *, user_token: str) -> _auth.Principal | None:
    """Who holds `token`: the user (the master's token) or a live run of a trial."""
    if not token:
        return None
    if _auth.tokens_equal(token, user_token):
        return _auth.UserPrincipal()
    row = store.allocations.token(_auth.hash_token(token))
    if row is None:
        return None
    trial = store.trials.get(row.trial_id)
    if trial is None:  # a token outlives its trial only until the trial's row is gone
        return None
    return _auth.TrialPrincipal(
        trial_id=row.trial_id,
        experiment_id=trial.experiment_id,
        allocation_id=row.allocation_id,
    )
