"""The `users` and `user_sessions` tables (migration 8): a shared master's accounts and sign-ins.

User 1 is the master's owner account (the holder of the master token). Session tokens are
stored as their sha256 only, like trial tokens.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from typing import Any, ClassVar

from ._repositories import TypedRepository
from ._rows import Row

OWNER_ID = 1


@dataclasses.dataclass(frozen=True)
class UserRow(Row):
    """A row of `users`."""

    TABLE: ClassVar[str] = "users"
    FLAGS: ClassVar[frozenset[str]] = frozenset({"admin", "active"})

    id: int
    username: str
    display_name: str
    password_hash: str | None  # None: no password (no password login)
    admin: bool
    active: bool
    created: float
    modified: float


class Users(TypedRepository[UserRow]):
    """The `users` table and the sessions of its users."""

    row_type = UserRow

    def all(self) -> list[UserRow]:
        """Every user, by id."""
        return self._select()

    def by_name(self, username: str) -> UserRow | None:
        """The user with exactly this name, or None."""
        rows = self._select("username = ?", (username,))
        return rows[0] if rows else None

    def names(self) -> dict[int, str]:
        """Every user's name by id (the experiment list's `username`)."""
        return {row["id"]: row["username"] for row in self._store.select("users")}

    def create(
        self, username: str, *, password_hash: str | None, admin: bool, display_name: str = ""
    ) -> int | None:
        """A new active user's id; None when the name is taken."""
        now = time.time()
        try:
            return self._insert(
                username=username,
                display_name=display_name,
                password_hash=password_hash,
                admin=bool(admin),
                active=True,
                created=now,
                modified=now,
            )
        except sqlite3.IntegrityError:
            return None

    def change(self, user_id: int, **changes: Any) -> None:
        """Write the given fields (admin, active, display_name, password_hash, username)."""
        self._update(user_id, **changes, modified=time.time())

    def rename_owner(self, username: str) -> None:
        """Name the owner account `username` unless another user holds that name."""
        if self.by_name(username) is None:
            self._update(OWNER_ID, username=username)

    # -- sessions ----------------------------------------------------------------------------
    def add_session(self, token_hash: str, user_id: int, created: float | None = None) -> None:
        """A sign-in of `user_id`, known by its token's hash, made at `created` (now)."""
        self._store.insert(
            "user_sessions",
            token_hash=token_hash,
            user_id=user_id,
            created=time.time() if created is None else created,
        )

    def session_user(self, token_hash: str) -> UserRow | None:
        """The user signed in with this token, or None."""
        stored = self._store.get("user_sessions", token_hash, key_column="token_hash")
        return None if stored is None else self.get(stored["user_id"])

    def session(self, token_hash: str) -> tuple[UserRow, float] | None:
        """The user signed in with this token and when they signed in, or None."""
        stored = self._store.get("user_sessions", token_hash, key_column="token_hash")
        if stored is None:
            return None
        row = self.get(stored["user_id"])
        return None if row is None else (row, float(stored["created"]))

    def end_sessions_before(self, cutoff: float) -> None:
        """Forget the sessions made before `cutoff` (expired: they no longer sign anyone in)."""
        self._store.execute("DELETE FROM user_sessions WHERE created < ?", (cutoff,))

    def end_session(self, token_hash: str) -> None:
        """Sign out: the token no longer authenticates."""
        self._store.execute("DELETE FROM user_sessions WHERE token_hash = ?", (token_hash,))

    def end_sessions_of(self, user_id: int, *, keep: str | None = None) -> None:
        """Sign a user out everywhere (but the session `keep`, a token hash)."""
        self._store.execute(
            "DELETE FROM user_sessions WHERE user_id = ? AND token_hash IS NOT ?",
            (user_id, keep),
        )

    def slot_usage_since(self, since: float) -> list[tuple[str, float, float | None, int]]:
        """(username, start, end or None while it runs, slots) of every allocation that held
        slots after `since` (time.time() clock): the history of slot-hours per day."""
        rows = self._store.select_sql(
            "SELECT COALESCE(u.username, 'user ' || e.owner_id) AS username, "
            "a.start_time AS start, a.end_time AS end, json_array_length(a.slot_ids) AS slots "
            "FROM allocations a JOIN trials t ON a.trial_id = t.id "
            "JOIN experiments e ON t.experiment_id = e.id "
            "LEFT JOIN users u ON u.id = e.owner_id "
            "WHERE (a.end_time IS NULL OR a.end_time > ?) AND a.slot_ids != '[]'",
            (since,),
        )
        return [(row["username"], row["start"], row["end"], row["slots"]) for row in rows]


__all__ = ["OWNER_ID", "UserRow", "Users"]
