"""Who is asking: a user (the master token: the owner account; or a user's sign-in) or one
trial run (its session token).

Trial tokens are random per run; only their sha256 is stored, so the database never holds a
usable credential.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets

OWNER_ID = 1  # the master's owner account: the holder of the master token (docs/team.md)


@dataclasses.dataclass(frozen=True)
class UserPrincipal:
    """A signed-in user. The default is the master's owner account (the master token's holder,
    an admin: may do everything); other users act only on what they own (docs/team.md)."""

    name: str = "user"
    user_id: int = OWNER_ID
    admin: bool = True


@dataclasses.dataclass(frozen=True)
class TrialPrincipal:
    """One run of one trial: may use only the trial-facing endpoints of its own trial."""

    trial_id: int
    experiment_id: int
    allocation_id: str


Principal = UserPrincipal | TrialPrincipal


def new_user_token() -> str:
    return secrets.token_urlsafe(32)


def new_session_token() -> str:
    """A user's sign-in token (`POST /api/v1/auth/login`); stored as its sha256 only."""
    return "session." + secrets.token_urlsafe(32)


def new_trial_token() -> str:
    return "trial." + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def tokens_equal(given: str, expected: str) -> bool:
    """Constant-time comparison, so response timing does not leak the user token."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


__all__ = [
    "OWNER_ID",
    "UserPrincipal",
    "TrialPrincipal",
    "Principal",
    "new_user_token",
    "new_session_token",
    "new_trial_token",
    "hash_token",
    "tokens_equal",
]
