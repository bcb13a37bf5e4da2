"""`User`: one account of a shared master (docs/team.md), as Determined's SDK has it."""

from __future__ import annotations

import logging
from typing import Any

from determined.common import api
from determined.common.api import authentication

logger = logging.getLogger("determined.client")


class User:
    """A user of the master: `username`, `admin`, `active`, `display_name` (`reload()` reads
    them again). Changing another user's flags needs an admin."""

    def __init__(self, user_id: int, session: api.Session) -> None:
        self.user_id = user_id
        self._session = session
        self.username: str = ""
        self.admin = False
        self.active = True
        self.remote = False
        self.display_name: str | None = None

    def _hydrate(self, answer: dict[str, Any]) -> None:
        self.username = answer.get("username", "")
        self.admin = bool(answer.get("admin"))
        self.active = bool(answer.get("active", True))
        self.remote = bool(answer.get("remote"))
        self.display_name = answer.get("displayName") or None

    @classmethod
    def _from_json(cls, answer: dict[str, Any], session: api.Session) -> User:
        made = cls(int(answer["id"]), session)
        made._hydrate(answer)
        return made

    def reload(self) -> None:
        """Read the user's fields from the master again."""
        self._hydrate(self._session.get(f"/users/{self.user_id}")["user"])

    def _patch(self, **fields: Any) -> None:
        self._hydrate(self._session.patch(f"/users/{self.user_id}", fields)["user"])

    def rename(self, new_username: str) -> None:
        """Give the user another name (admins only)."""
        self._patch(username=new_username)

    def activate(self) -> None:
        """Let the user sign in again (admins only)."""
        self._patch(active=True)

    def deactivate(self) -> None:
        """Refuse the user's sign-ins and tokens from now on (admins only)."""
        self._patch(active=False)

    def change_display_name(self, display_name: str) -> None:
        """The name shown for the user (the user or an admin)."""
        self._patch(displayName=display_name)

    def change_password(self, new_password: str) -> None:
        """A new password (the user or an admin).

        Raises:
            ValueError: it does not meet Determined's password rules (the message lists them).
        """
        authentication.check_password_complexity(new_password)
        self._hydrate(self._session.post(f"/users/{self.user_id}/password", new_password)["user"])

    def __repr__(self) -> str:
        return f"User(user_id={self.user_id}, username={self.username!r}, admin={self.admin})"


def sign_in(session: api.Session, username: str, password: str) -> api.Session:
    """A session with the same master signed in as `username` (`POST /api/v1/auth/login`);
    `session` is closed.

    Code written for Determined often signs in as its default user (`user="determined",
    password=""`), which no master-lite account matches: when the refused sign-in came with
    the master's token at hand (DET_MASTER_TOKEN, master.json), that token is used, as before
    the master had users (a warning says so). Otherwise the refusal is raised."""
    try:
        answer = session.post("/auth/login", {"username": username, "password": password})
    except api.Unauthorized as e:
        if not session.token or "deactivated" in e.message:
            raise
        logger.warning(
            "signing in as %r failed (%s); using the master token found for %s instead",
            username,
            e.message,
            session.master_url,
        )
        return session
    signed_in = api.Session(session.master_url, answer["token"], address=session.address)
    session.close()
    return signed_in


def create_user(
    session: api.Session, username: str, admin: bool, password: str | None, remote: bool
) -> User:
    """`Determined.create_user`."""
    if remote:
        raise ValueError("remote (SSO) users are not supported here: give a password")
    authentication.check_password_complexity(password)
    body = {"user": {"username": username, "admin": bool(admin)}, "password": password or ""}
    return User._from_json(session.post("/users", body)["user"], session)


def list_users(session: api.Session, active: bool | None) -> list[User]:
    """`Determined.list_users`."""
    params = {} if active is None else {"active": "true" if active else "false"}
    return [User._from_json(u, session) for u in session.get("/users", params=params)["users"]]


__all__ = ["User", "create_user", "list_users", "sign_in"]
