"""Where is the master? `-m`, else DET_MASTER (+ DET_MASTER_TOKEN), else <root_dir>/master.json,
else the master of the login `det user login` stored (Determined's auth.json). The token, when
nothing of Determined's own applies: the user's JupyterHub API token (`JUPYTERHUB_API_TOKEN`,
set in every JupyterHub single-user server and inherited by its kernels and terminals), sent as
`Authorization: token …` to a master that runs as the Hub's service (docs/team.md).

Every place looked at is remembered (`MasterAddress.tried`), so that "no master" and "cannot
reach the master" errors say what was tried and what to do, instead of a bare connection error.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import socket

from determined.common.api import authentication
from determined.common.api._errors import MasterNotFound, TokenStoreError

HOW_TO_START = (
    "start JupyterLab with the jupyter_determined extension enabled (it runs the master and gives "
    "its kernels DET_MASTER), or run `master-lite` in a terminal; or point at a running master "
    "with DET_MASTER=URL (and DET_MASTER_TOKEN) or `det -m URL`"
)


@dataclasses.dataclass(frozen=True)
class MasterAddress:
    url: str  # API root without /api/v1, e.g. http://127.0.0.1:8080
    token: str | None
    source: str  # where the address came from, for error messages
    tried: tuple[str, ...] = ()  # every place discovery looked at, in order, for error messages
    token_source: str | None = None  # where the token came from, for error messages
    # the user of the login stored by `det user login`, when that login gave the token
    user: str | None = None
    # the Authorization scheme the token is sent with: "token" for a JupyterHub API token (as
    # JupyterHub's own clients send it), "Bearer" for the master's own kinds (as Determined)
    token_scheme: str = "Bearer"
    # the master's other URL in master.json (the advertised one, when `url` is the local one):
    # a DET_MASTER naming it gets master.json's token too
    other_urls: tuple[str, ...] = ()


# The user's own JupyterHub API token: JupyterHub sets it for a single-user server, whose kernels
# and terminals inherit it. A shared master run as the Hub's service accepts it (docs/team.md).
HUB_TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
HUB_TOKEN_SCHEME = "token"


def default_root_dir() -> pathlib.Path:
    """The master's default root dir: <jupyter data dir>/determined (MASTER_LITE_ROOT_DIR wins)."""
    env = os.environ.get("MASTER_LITE_ROOT_DIR")
    if env:
        return pathlib.Path(env)
    try:
        from jupyter_core.paths import jupyter_data_dir
    except ImportError:  # jupyter_core is a dependency; keep discovery working without it anyway
        return pathlib.Path.home() / ".local" / "share" / "jupyter" / "determined"
    return pathlib.Path(jupyter_data_dir()) / "determined"


def canonical_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    return url


def _process_running(pid: object) -> bool | None:
    """Whether process `pid` (of this machine) runs; None when that cannot be told."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return None
    return True


def _look_at_master_file(path: pathlib.Path) -> tuple[MasterAddress | None, str]:
    """(the address in master.json or None, a note on what was found there)."""
    try:
        info = json.loads(path.read_text())
        url = canonical_url(info["url"])
        other_urls: tuple[str, ...] = ()
        # A master bound to every address advertises one for other machines (`url`) and
        # names the one for clients on its own host (`local_url`, on `hostname`).
        if info.get("local_url") and info.get("hostname") == socket.gethostname():
            url, other_urls = canonical_url(info["local_url"]), (url,)
    except FileNotFoundError:
        return None, f"{path}: not found"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise MasterNotFound(
            f"{path}: unreadable master file ({e}); remove it, then {HOW_TO_START}"
        ) from e
    note = f"{path}: names {url}"
    if _process_running(info.get("pid")) is False:
        note += (
            f" (written by process {info['pid']}, which is no longer running: that master "
            "stopped without removing the file)"
        )
    token = info.get("token") or _read_token_file(path, info)
    return MasterAddress(url, token, str(path), other_urls=other_urls), note


def _read_token_file(path: pathlib.Path, info: dict) -> str | None:
    """The user token a master-lite keeps beside master.json: `token_file` (0600 in a 0700
    directory, readable by the master's Unix user only), default `<root_dir>/private/user_token`.
    Masters of earlier versions wrote the token into master.json itself (read first)."""
    token_file = info.get("token_file") or path.parent / "private" / "user_token"
    try:
        token = pathlib.Path(token_file).read_text().strip()
    except (OSError, TypeError, ValueError):
        return None  # not this user's master, or none running: the login store decides
    return token or None


def master_file_path(root_dir: str | os.PathLike | None = None) -> pathlib.Path:
    """`<root_dir>/master.json`: where a running master-lite publishes its address."""
    return (pathlib.Path(root_dir) if root_dir is not None else default_root_dir()) / "master.json"


def read_master_file(root_dir: str | os.PathLike | None = None) -> MasterAddress | None:
    """The address a running master-lite published in `<root_dir>/master.json`, if any."""
    found, _ = _look_at_master_file(master_file_path(root_dir))
    return found


def discover_master(
    master: str | None = None,
    token: str | None = None,
    *,
    given_as: str = "-m",
    user: str | None = None,
) -> MasterAddress:
    """Resolve the master in the documented order; raise MasterNotFound saying what was tried.

    The URL: `master`, else DET_MASTER (or DET_MASTER_ADDR), else `<root_dir>/master.json`, else
    the one master `det user login` stored a login for (auth.json). The token: `token`, else
    DET_MASTER_TOKEN (or DET_SESSION_TOKEN), else master.json's when it names the same URL (the
    running master wrote it: always current), else the login stored for that URL (`user`'s, or
    the active user's), else the user's JupyterHub API token (JUPYTERHUB_API_TOKEN). `given_as`
    names the `master` argument in messages (`-m` for the CLI, `master_url=` for the Native API).
    """
    token_source: str | None = "token" if token else None
    if not token:
        for name in ("DET_MASTER_TOKEN", "DET_SESSION_TOKEN"):
            if os.environ.get(name):
                token, token_source = os.environ[name], name
                break
    path = master_file_path()
    env_name = "DET_MASTER" if os.environ.get("DET_MASTER") else "DET_MASTER_ADDR"
    env = os.environ.get(env_name)
    if master or env:
        given = master or env
        assert given is not None
        url = canonical_url(given)
        found, note = _look_at_master_file(path)
        given_tried = (f"{given_as} {master}" if master else f"{env_name}={env}", note)
        address = MasterAddress(
            url, token, given_as if master else env_name, given_tried, token_source
        )
        return _with_token(address, found, user)
    found, note = _look_at_master_file(path)
    tried: tuple[str, ...] = ("DET_MASTER: not set", note)
    if found is not None:
        found = dataclasses.replace(found, tried=tried)
        if token:
            return dataclasses.replace(found, token=token, token_source=token_source)
        if found.token:
            return dataclasses.replace(found, token_source=found.source)
        return _with_token(found, None, user)
    # No master.json: the master of the one stored login, if there is exactly one.
    auth_path = authentication.auth_file_path()
    try:
        logged_in = authentication.logged_in_masters(auth_path)
    except TokenStoreError as e:
        raise MasterNotFound(not_found_message((*tried, f"{auth_path}: {e}"))) from e
    if len(logged_in) == 1:
        url = canonical_url(logged_in[0])
        tried = (*tried, f"{auth_path}: logged in to {url}")
        address = MasterAddress(url, token, str(auth_path), tried, token_source)
        return _with_token(address, None, user)
    if logged_in:
        tried = (
            *tried,
            f"{auth_path}: logged in to {len(logged_in)} masters ({', '.join(logged_in)}); "
            "choose one with -m or DET_MASTER",
        )
    else:
        tried = (*tried, f"{auth_path}: no login (det user login)")
    raise MasterNotFound(not_found_message(tried))


def _with_token(
    address: MasterAddress, master_file: MasterAddress | None, user: str | None
) -> MasterAddress:
    """`address` with its token: its own, else master.json's for the same URL, else the login
    stored for the URL, else the JupyterHub API token of the user (JUPYTERHUB_API_TOKEN)."""
    if address.token:
        return address
    if (
        master_file is not None
        and address.url in (master_file.url, *master_file.other_urls)
        and master_file.token
    ):
        return dataclasses.replace(
            address, token=master_file.token, token_source=master_file.source
        )
    login = authentication.stored_login(address.url, user)
    if login is None:
        return _with_hub_token(address)
    name, token = login
    return dataclasses.replace(
        address,
        token=token,
        token_source=f"{authentication.auth_file_path()} (det user login as {name!r})",
        user=name,
    )


def _with_hub_token(address: MasterAddress) -> MasterAddress:
    """`address` with the user's JupyterHub API token, when JupyterHub gave this process one:
    inside a single-user server, `det` and the SDK act as the Hub user with no login step."""
    hub_token = os.environ.get(HUB_TOKEN_ENV, "").strip()
    if not hub_token:
        return address
    return dataclasses.replace(
        address, token=hub_token, token_source=HUB_TOKEN_ENV, token_scheme=HUB_TOKEN_SCHEME
    )


def not_found_message(tried: tuple[str, ...] | list[str]) -> str:
    """`no master found`, what was looked at, and how to start one."""
    return "\n".join(
        [
            "no master found; looked at:",
            *(f"  {place}" for place in tried),
            f"to fix: {HOW_TO_START}",
        ]
    )


def unreachable_message(url: str, reason: str, address: MasterAddress | None) -> str:
    """`cannot reach the master at URL: REASON`, then (for a discovered address) where the
    address came from, what else was looked at, and what to do."""
    lines = [f"cannot reach the master at {url}: {reason}"]
    if address is not None and address.tried:
        lines.append("looked at:")
        lines.extend(f"  {place}" for place in address.tried)
        lines.append(f"to fix: {HOW_TO_START}")
    return "\n".join(lines)
