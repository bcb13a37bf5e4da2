"""The user functions of `determined.experimental.client` (a shared master's accounts,
docs/team.md), over the client module's `Determined` singleton; `client` re-exports them."""

from __future__ import annotations

from determined.common.experimental.user import User
from determined.experimental import client


@client._require_singleton
def create_user(
    username: str, admin: bool, password: str | None = None, remote: bool = False
) -> User:
    """Create a user of the master (admins only; docs/team.md); without a password it cannot
    sign in until one is set. `remote` (SSO) users are not supported (ValueError)."""
    return client._singleton().create_user(username, admin, password, remote)


@client._require_singleton
def get_user_by_id(user_id: int) -> User:
    """The user with this id."""
    return client._singleton().get_user_by_id(user_id)


@client._require_singleton
def get_user_by_name(user_name: str) -> User:
    """The user with this name."""
    return client._singleton().get_user_by_name(user_name)


@client._require_singleton
def get_session_username() -> str:
    """The signed-in user's name (the master token: the master's owner account)."""
    return client._singleton().get_session_username()


@client._require_singleton
def whoami() -> User:
    """The signed-in user."""
    return client._singleton().whoami()


@client._require_singleton
def list_users(active: bool | None = None) -> list[User]:
    """Every user of the master; only (in)active ones when `active` is given."""
    return client._singleton().list_users(active)


__all__ = [
    "User",
    "create_user",
    "get_session_username",
    "get_user_by_id",
    "get_user_by_name",
    "list_users",
    "whoami",
]
