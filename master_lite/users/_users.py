"""Users: a standalone master's accounts, their sign-ins, and who may act on what.

User 1 is the master's owner account: the master token (master.json, DET_MASTER_TOKEN) signs
in as it, and it is named after the Unix login that runs the master. Other users sign in with
a password (`POST /api/v1/auth/login`) and get a session token. Anyone signed in may read;
only an object's owner or an admin may act on it (`check_may_act`, asked by the API for every
operation its route table declares an owner check for; docs/team.md).
"""

from __future__ import annotations

import getpass
import re
import time
from collections.abc import Callable
from typing import Any

from master_lite import errors
from master_lite._core import MasterState, _auth
from master_lite._core._serialize import iso
from master_lite.store import OWNER_ID, UserRow

from ._hub import HubIdentity
from ._passwords import hash_password, verify_password
from ._reading import check_read_access
from ._signin import SESSION_LIFETIME_HOURS, SignInGuard, describe_hours
from ._usernames import check_username

_ONLY_DIGITS = re.compile(r"^[0-9]+$")
MAX_DISPLAY_NAME = 256
MAX_PASSWORD = 1024


def login_name() -> str:
    """The Unix login running the master: the owner account's name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "determined"


def _check_password(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_PASSWORD:
        raise errors.InvalidRequest(f"{where}: expected a string of at most {MAX_PASSWORD} chars")
    return value


def _check_display_name(value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_DISPLAY_NAME or "\x00" in value:
        raise errors.InvalidRequest(
            f"displayName: expected text of at most {MAX_DISPLAY_NAME} characters"
        )
    return value


def user_json(row: UserRow) -> dict:
    """Determined's User object."""
    return {
        "id": row.id,
        "username": row.username,
        "displayName": row.display_name,
        "admin": row.admin,
        "active": row.active,
        "remote": False,
        "modifiedAt": iso(row.modified),
    }


class Users:
    """The users part: accounts, sign-ins, and the owner-or-admin rule."""

    def __init__(
        self,
        shared: MasterState,
        *,
        session_lifetime_hours: float = SESSION_LIFETIME_HOURS,
        read_access: str = "all",
    ) -> None:
        if not session_lifetime_hours > 0:
            raise ValueError(
                f"session_lifetime_hours: expected a number of hours above 0, got "
                f"{session_lifetime_hours!r}"
            )
        self._shared = shared
        self.session_lifetime_hours = session_lifetime_hours
        # Who reads what (docs/team.md, "Who may read"): "all", or "own" (a non-admin user
        # reads only what they own); the API layer applies it (api/_reads.py).
        self.read_access = check_read_access(read_access)
        # Run as a JupyterHub service (`use_hub`): tokens the master does not know, and the
        # service's OAuth cookie, are asked of the Hub (docs/team.md).
        self.hub: HubIdentity | None = None
        # What time it is (tests move it instead of waiting): session expiry, sign-in limits.
        self.clock: Callable[[], float] = time.time
        self.sign_ins = SignInGuard(lambda: self.clock())
        self._owner_name = "user"
        # Owners of what is not in the store (TensorBoards): kind -> key -> (owner id, label).
        self._owner_lookups: dict[str, Callable[[Any], tuple[int, str]]] = {}

    def use_hub(self, auth: Any) -> HubIdentity:
        """Identify callers through the JupyterHub `auth` (a configured
        `jupyterhub.services.auth.HubOAuth`) after the master's own tokens."""
        self.hub = HubIdentity(self._shared, auth)
        return self.hub

    def register_owner(self, kind: str, lookup: Callable[[Any], tuple[int, str]]) -> None:
        """Let `check_may_act` ask `lookup(key)` for (owner id, label) of objects of `kind`
        that another part keeps (NotFound for none)."""
        self._owner_lookups[kind] = lookup

    def open(self) -> None:
        """At start: name the owner account after the Unix login running the master."""
        self._shared.store.users.rename_owner(login_name())
        self._owner_name = self._row(OWNER_ID).username

    @property
    def _store(self) -> Any:
        return self._shared.store.users

    def _row(self, user_id: int) -> UserRow:
        row = self._store.get(int(user_id))
        if row is None:
            raise errors.NotFound(f"user {user_id} not found")
        return row

    # -- who is asking -----------------------------------------------------------------------
    def owner_principal(self) -> _auth.UserPrincipal:
        """The holder of the master token: the owner account, an admin."""
        return _auth.UserPrincipal(name=self._owner_name, user_id=OWNER_ID, admin=True)

    def authenticate(self, token: str) -> _auth.UserPrincipal | None:
        """The user signed in with `token`, or None; Unauthorized for a deactivated user."""
        if not token.startswith("session."):
            return None
        found = self._store.session(_auth.hash_token(token))
        if found is None:
            return None
        row, created = found
        if not row.active:
            raise errors.Unauthorized(
                f"user {row.username!r} is deactivated: its sign-in no longer works; an admin "
                f"can activate it (det user activate {row.username})"
            )
        if self.clock() - created > self.session_lifetime_hours * 3600:
            raise errors.Unauthorized(
                f"the session of user {row.username!r} expired: sessions last "
                f"{describe_hours(self.session_lifetime_hours)} (session_lifetime_hours); sign "
                f"in again: det user login {row.username}"
            )
        return _auth.UserPrincipal(name=row.username, user_id=row.id, admin=row.admin)

    # -- sign-in -----------------------------------------------------------------------------
    def login(
        self, username: Any, password: Any, *, is_hashed: bool = False, address: str | None = None
    ) -> dict:
        """`{token, user}` for a right password; Unauthorized otherwise (nothing said of
        which part was wrong, as Determined); TooManyRequests after too many wrong ones for
        that name or from that client `address` (_signin.py), checked before the password."""
        name = username if isinstance(username, str) else repr(username)
        self.sign_ins.check(name, address)
        row = self._store.by_name(username) if isinstance(username, str) else None
        password = _check_password(password, "password")
        stored = row.password_hash if row is not None else None
        # Verified even for no such user (the same work): timing does not tell who exists.
        if not verify_password(stored, password, is_hashed=is_hashed) or row is None:
            self.sign_ins.failed(name, address)
            raise errors.Unauthorized("invalid username and/or password")
        self.sign_ins.succeeded(name)
        if not row.active:
            raise errors.Unauthorized(
                f"user {row.username!r} is deactivated: an admin can activate it "
                f"(det user activate {row.username})"
            )
        token, now = _auth.new_session_token(), self.clock()
        # Expired sessions sign nobody in: forget them as new ones are made.
        self._store.end_sessions_before(now - self.session_lifetime_hours * 3600)
        self._store.add_session(_auth.hash_token(token), row.id, created=now)
        return {"token": token, "user": user_json(row)}

    def logout(self, token: str | None) -> None:
        """End the session of `token` (the master token has none to end)."""
        if token:
            self._store.end_session(_auth.hash_token(token))

    # -- accounts ----------------------------------------------------------------------------
    def me(self, principal: _auth.UserPrincipal) -> dict:
        return {"user": user_json(self._row(principal.user_id))}

    def get_user(self, user_id: int) -> dict:
        return {"user": user_json(self._row(user_id))}

    def get_user_by_name(self, username: str) -> dict:
        row = self._store.by_name(username)
        if row is None:
            raise errors.NotFound(f"user {username!r} not found")
        return {"user": user_json(row)}

    def list_users(
        self, *, name: str | None = None, active: bool | None = None, admin: bool | None = None
    ) -> list[dict]:
        rows = self._store.all()
        if name:
            rows = [r for r in rows if name.lower() in (r.username + r.display_name).lower()]
        if active is not None:
            rows = [r for r in rows if r.active == active]
        if admin is not None:
            rows = [r for r in rows if r.admin == admin]
        return [user_json(r) for r in rows]

    def create_user(
        self,
        username: Any,
        *,
        password: Any = None,
        admin: bool = False,
        display_name: Any = "",
        is_hashed: bool = False,
    ) -> dict:
        """A new active user (admins only: the route table checks). No password (None or
        empty): the user cannot sign in until one is set."""
        username = check_username(username)
        stored = None
        if password:
            stored = hash_password(_check_password(password, "password"), is_hashed=is_hashed)
        new_id = self._store.create(
            username,
            password_hash=stored,
            admin=bool(admin),
            display_name=_check_display_name(display_name or ""),
        )
        if new_id is None:
            raise errors.Conflict(f"user {username!r} already exists: choose another name")
        return {"user": user_json(self._row(new_id))}

    def patch_user(self, principal: _auth.UserPrincipal, user_id: int, patch: dict) -> dict:
        """Change a user (the route table let only the user or an admin in): `displayName`
        by either; `active`, `admin`, `username`, `password` by an admin only."""
        row = self._row(user_id)
        admin_fields = sorted(k for k in ("active", "admin", "username", "password") if k in patch)
        if admin_fields and not principal.admin:
            raise errors.Forbidden(
                f"only an admin may change {', '.join(admin_fields)} of a user; "
                f"{principal.name} may change only the displayName of their own account"
            )
        if row.id == OWNER_ID and (
            patch.get("active") is False or patch.get("admin") is False or "username" in patch
        ):
            raise errors.InvalidRequest(
                f"user {row.username!r} is the master's owner account (the holder of the "
                "master token): it stays active and an admin, under the Unix login's name"
            )
        changes: dict[str, Any] = {}
        if "displayName" in patch:
            changes["display_name"] = _check_display_name(patch["displayName"])
        if "username" in patch:
            changes["username"] = check_username(patch["username"])
            other = self._store.by_name(changes["username"])
            if other is not None and other.id != row.id:
                raise errors.Conflict(f"user {changes['username']!r} already exists")
        for flag in ("active", "admin"):
            if patch.get(flag) is not None:
                changes[flag] = bool(patch[flag])
        if patch.get("password") is not None:
            changes["password_hash"] = hash_password(
                _check_password(patch["password"], "password"),
                is_hashed=bool(patch.get("isHashed")),
            )
        if changes:
            self._store.change(row.id, **changes)
        return {"user": user_json(self._row(row.id))}

    def set_password(self, user_id: int, password: Any, *, is_hashed: bool = False) -> dict:
        """A new password (the route table let only the user or an admin in)."""
        row = self._row(user_id)
        password = _check_password(password, "password")
        if not password:
            raise errors.InvalidRequest("password: empty; give the new password")
        self._store.change(row.id, password_hash=hash_password(password, is_hashed=is_hashed))
        return {"user": user_json(self._row(row.id))}

    # -- who may act on what -----------------------------------------------------------------
    def names(self) -> dict[int, str]:
        """Every user's name by id."""
        return self._store.names()

    def check_may_act(self, principal: _auth.UserPrincipal, kind: str, key: Any, verb: str) -> None:
        """Forbidden unless `principal` owns the object (`kind` "experiment", "trial",
        "checkpoint", "model", "user", "workspace", "project") or is an admin. NotFound for
        no such object."""
        if principal.admin:
            return  # an admin may act on anything (a missing object: the handler's 404)
        if kind == "admin":
            raise errors.Forbidden(f"only an admin may {verb}; {principal.name} is not one")
        owner_id, label = self._owner_of(kind, key)
        if owner_id == principal.user_id:
            return
        if kind == "user":
            name = self._row(key).username
            raise errors.Forbidden(
                f"{principal.name} may not {verb} user {name}: only {name} or an admin may"
            )
        owner = self.names().get(owner_id, f"user {owner_id}")
        raise errors.Forbidden(
            f"{label} belongs to {owner}: only {owner} or an admin may {verb} it"
        )

    def owner_of(self, kind: str, key: Any) -> int:
        """The id of the user who owns the object (`kind` as for `check_may_act`, or
        "allocation"); NotFound for no such object."""
        return self._owner_of(kind, key)[0]

    def _owner_of(self, kind: str, key: Any) -> tuple[int, str]:
        store = self._shared.store
        if kind in self._owner_lookups:
            return self._owner_lookups[kind](key)
        if kind == "user":
            return self._row(key).id, f"user {key}"
        if kind == "model":
            text = str(key)
            number = int(text) if _ONLY_DIGITS.match(text) and int(text) < 2**63 else None
            model = store.models.get(number) if number is not None else store.models.by_name(text)
            if model is None:
                raise errors.NotFound(f"model {text!r} not found")
            return model.owner_id, f"model {model.name!r}"
        if kind in ("workspace", "project"):
            repository = store.workspaces if kind == "workspace" else store.projects
            place = repository.get(int(key))
            if place is None:
                raise errors.NotFound(f"{kind} {key} not found")
            return place.owner_id, f"{kind} {place.name!r}"
        label = f"{kind} {key}"
        experiment_id = key
        if kind == "allocation":  # a trial's run: its trial's experiment
            allocation = store.allocations.get(str(key))
            if allocation is None:
                raise errors.NotFound(f"allocation {key} not found")
            kind, key = "trial", allocation.trial_id
        if kind == "trial":
            trial = store.trials.get(int(key))
            if trial is None:
                raise errors.NotFound(f"trial {key} not found")
            experiment_id = trial.experiment_id
        elif kind == "checkpoint":
            checkpoint = store.checkpoints.get(str(key))
            if checkpoint is None:
                raise errors.NotFound(f"checkpoint {key} not found")
            experiment_id = checkpoint.experiment_id
            label = f"checkpoint {key} (experiment {experiment_id})"
        elif kind != "experiment":
            raise ValueError(f"check_may_act: unknown kind {kind!r}")
        experiment = store.experiments.get(int(experiment_id))
        if experiment is None:
            raise errors.NotFound(f"experiment {experiment_id} not found")
        if kind == "trial":
            label = f"trial {key} (experiment {experiment_id})"
        return experiment.owner_id, label


__all__ = ["Users", "login_name", "user_json"]
