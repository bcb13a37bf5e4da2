"""Where `det user login` keeps its tokens: Determined's `auth.json` token store.

The file is where Determined keeps it and has its layout (version 2), so both read each other's::

    <config dir>/determined/auth.json      # config dir: $XDG_CONFIG_HOME or ~/.config on Linux,
                                           # ~/Library/Application Support on macOS,
                                           # %LOCALAPPDATA% on Windows; DET_DEBUG_CONFIG_PATH
                                           # names the determined/ directory itself
    {"version": 2,
     "masters": {"http://host:8080": {"active_user": "NAME", "tokens": {"NAME": "TOKEN"}}}}

Master URLs are keys in Determined's canonical form (scheme, host and an explicit port). The
directory is created with mode 0700 and the file is always written with mode 0600, through a
temporary file replaced atomically, under a lock file (`auth.json.lock`) on POSIX systems.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import platform
import re
import sys
from collections.abc import Iterator
from typing import Any
from urllib import parse

from determined.common.api._errors import TokenStoreError

AUTH_FILE_NAME = "auth.json"
STORE_VERSION = 2


def config_dir() -> pathlib.Path:
    """Determined's per-user configuration directory (`.../determined`)."""
    override = os.environ.get("DET_DEBUG_CONFIG_PATH")
    if override:
        return pathlib.Path(override)
    system = platform.system()
    if "Linux" in system and os.environ.get("XDG_CONFIG_HOME"):
        base = pathlib.Path(os.environ["XDG_CONFIG_HOME"])
    elif "Darwin" in system:
        base = pathlib.Path.home() / "Library" / "Application Support"
    elif "Windows" in system and os.environ.get("LOCALAPPDATA"):
        base = pathlib.Path(os.environ["LOCALAPPDATA"])
    else:
        base = pathlib.Path.home() / ".config"
    return base / "determined"


def auth_file_path() -> pathlib.Path:
    """`<config dir>/determined/auth.json`."""
    return config_dir() / AUTH_FILE_NAME


def store_key(url: str) -> str:
    """A master URL as Determined keys it in auth.json: scheme://host:port[/path], explicit port."""
    url = url.strip()
    if url.startswith("https://"):
        default_port = 443
    elif url.startswith("http://"):
        default_port = 80
    else:
        url, default_port = f"http://{url}", 8080
    parsed = parse.urlparse(url)
    if not parsed.hostname:
        raise ValueError(f"invalid master url {url}: no host name")
    host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
    path = parsed.path.rstrip("/")
    if path.endswith("/api/v1"):
        path = path[: -len("/api/v1")]
    return f"{parsed.scheme}://{host}:{parsed.port or default_port}{path}"


@contextlib.contextmanager
def _locked(lock_path: pathlib.Path) -> Iterator[None]:
    """An exclusive lock on `lock_path` (POSIX); elsewhere no lock (one writer is the norm)."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _check_entry(entry: Any) -> bool:
    if not isinstance(entry, dict) or set(entry) - {"active_user", "tokens"}:
        return False
    if not isinstance(entry.get("active_user", ""), str):
        return False
    tokens = entry.get("tokens", {})
    return isinstance(tokens, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in tokens.items()
    )


def _parse_store(text: str, path: pathlib.Path) -> dict[str, Any]:
    """The store in version-2 form; version 1 (keys not yet canonical) is converted."""
    try:
        store = json.loads(text)
    except ValueError as e:
        raise TokenStoreError(f"{path} is not valid JSON ({e}); remove it and log in again") from e
    if not isinstance(store, dict) or store.get("version") not in (1, 2):
        raise TokenStoreError(
            f"{path} is not a Determined token store of version 1 or 2; remove it and log in again"
        )
    masters = store.get("masters", {})
    if not isinstance(masters, dict) or not all(_check_entry(v) for v in masters.values()):
        raise TokenStoreError(f"{path} has a malformed 'masters' entry; remove it and log in again")
    canonical: dict[str, Any] = {}
    for url, entry in masters.items():
        try:
            key = store_key(url)
        except ValueError:
            continue  # as Determined: an entry with an unusable URL is dropped, not fatal
        merged = canonical.setdefault(key, {"tokens": {}})
        merged["tokens"].update(entry.get("tokens", {}))
        if "active_user" in entry and "active_user" not in merged:
            merged["active_user"] = entry["active_user"]
    return {"version": STORE_VERSION, "masters": canonical}


class TokenStore:
    """The tokens stored for one master, and its active user (set by `det user login`).

    Reads are snapshots taken at construction; each change is a locked read-modify-write of the
    file, so concurrent `det` processes do not lose each other's logins.
    """

    def __init__(self, master_url: str, path: pathlib.Path | None = None) -> None:
        self.master_url = store_key(master_url)
        self.path = pathlib.Path(path) if path is not None else auth_file_path()
        self._entry: dict[str, Any] = self._read().get("masters", {}).get(self.master_url, {})

    # -- reading ---------------------------------------------------------------------------------
    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {"version": STORE_VERSION, "masters": {}}
        except OSError as e:
            raise TokenStoreError(f"cannot read {self.path}: {e}") from e
        return _parse_store(text, self.path)

    def get_active_user(self) -> str | None:
        user = self._entry.get("active_user")
        return user if isinstance(user, str) else None

    def get_all_users(self) -> list[str]:
        return list(self._entry.get("tokens", {}))

    def get_token(self, user: str) -> str | None:
        token = self._entry.get("tokens", {}).get(user)
        return token if isinstance(token, str) else None

    # -- changing --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _change(self) -> Iterator[dict[str, Any]]:
        """Yield this master's entry of the freshly read store; write the store back after."""
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _locked(directory / (self.path.name + ".lock")):
            store = self._read()
            masters = store.setdefault("masters", {})
            entry = masters.setdefault(self.master_url, {})
            yield entry
            if not entry.get("tokens") and "active_user" not in entry:
                masters.pop(self.master_url, None)
            self._write(store)
            self._entry = masters.get(self.master_url, {})

    def _write(self, store: dict[str, Any]) -> None:
        temp = self.path.with_name(self.path.name + ".temp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # a leftover temp file may have had another mode
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                fd = -1
                json.dump(store, f, indent=4, sort_keys=True)
        finally:
            if fd >= 0:
                os.close(fd)
        os.replace(temp, self.path)

    def set_token(self, user: str, token: str) -> None:
        with self._change() as entry:
            entry.setdefault("tokens", {})[user] = token

    def set_active(self, user: str) -> None:
        with self._change() as entry:
            if user not in entry.get("tokens", {}):
                raise TokenStoreError(f"no token stored for user {user!r} of {self.master_url}")
            entry["active_user"] = user

    def clear_active(self) -> None:
        with self._change() as entry:
            entry.pop("active_user", None)

    def drop_user(self, user: str) -> None:
        with self._change() as entry:
            entry.get("tokens", {}).pop(user, None)
            if entry.get("active_user") == user:
                entry.pop("active_user")


def stored_login(
    master_url: str, user: str | None = None, path: pathlib.Path | None = None
) -> tuple[str, str] | None:
    """(user, token) stored for `master_url`: `user`'s if given, else the active user's."""
    store = TokenStore(master_url, path)
    name = user or store.get_active_user()
    if name is None:
        return None
    token = store.get_token(name)
    return (name, token) if token is not None else None


def logged_in_masters(path: pathlib.Path | None = None) -> list[str]:
    """The masters of the store that have an active user with a token, in the store's order."""
    path = pathlib.Path(path) if path is not None else auth_file_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as e:
        raise TokenStoreError(f"cannot read {path}: {e}") from e
    masters = _parse_store(text, path)["masters"]
    return [
        url for url, entry in masters.items() if entry.get("active_user") in entry.get("tokens", {})
    ]


# Determined's password rules, as its clients check them (the master stores only a hash of what
# they send, so it cannot): each rule with its wording, kept so that messages match Determined's.
_PASSWORD_RULES: tuple[tuple[str, Any], ...] = (
    ("password cannot be blank", lambda p: bool(p)),
    ("password must have at least 8 characters", lambda p: len(p) >= 8),
    ("password must include an uppercase letter", lambda p: re.search(r"[A-Z]", p) is not None),
    ("password must include a lowercase letter", lambda p: re.search(r"[a-z]", p) is not None),
    ("password must include a number", lambda p: re.search(r"\d", p) is not None),
)


def check_password_complexity(password: str | None) -> None:
    """Raise ValueError unless `password` meets Determined's rules: at least 8 characters, an
    upper-case letter, a lower-case letter and a number. The message lists every rule, each
    marked met (✓) or not (✗), as Determined's does."""
    text = password or ""
    lines = []
    ok = True
    for rule, met in _PASSWORD_RULES:
        passed = bool(text) and bool(met(text))
        ok = ok and passed
        lines.append(("\u2713 " if passed else "\u2717 ") + rule)
    if not ok:
        raise ValueError("\n".join(lines))


def warn_about_complexity(error: ValueError) -> None:
    """Tell the user (stderr) that the password they signed in with breaks the rules."""
    print(
        "Warning: your password does not appear to satisfy recommended complexity "
        f"requirements:\n{error}\nPlease change your password as soon as possible "
        "(det user change-password).",
        file=sys.stderr,
    )


__all__ = [
    "AUTH_FILE_NAME",
    "TokenStore",
    "auth_file_path",
    "check_password_complexity",
    "config_dir",
    "logged_in_masters",
    "store_key",
    "stored_login",
    "warn_about_complexity",
]
