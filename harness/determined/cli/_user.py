"""`det user` (alias `u`): sign in, and a shared master's accounts (docs/team.md).

`login` signs in with a user's password (`POST /api/v1/auth/login`) and stores the session's
token where Determined keeps its logins (`~/.config/determined/auth.json`, see
`determined.common.api.authentication`); later commands use it when no other token is found.
The master's own token (`DET_MASTER_TOKEN` of JupyterLab's kernels, `token` of
`<root_dir>/master.json`) is accepted as the password too: it signs in as the master's owner
account, as before the master had users. `create`, `list`, `activate`, `deactivate` and
`change-password` manage accounts (admins; a user may change their own password).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import urllib.parse
from typing import Any

from determined.cli._base import CliError, Context
from determined.cli._render import print_table
from determined.common import api
from determined.common.api import _session, authentication


def default_username() -> str:
    """The name used when none is given: DET_USER, else the login name."""
    name = os.environ.get("DET_USER")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "determined"


def _read_password(prompt: str, *, confirm: bool = False) -> str:
    """Determined's prompt on a terminal (asked twice with `confirm`); otherwise the first line
    of standard input, so `det user login < password-file` and pipes work without a terminal."""
    if sys.stdin is not None and sys.stdin.isatty():
        password = getpass.getpass(prompt)
        if confirm and getpass.getpass("Confirm password: ") != password:
            raise CliError("Passwords do not match")
        return password
    line = sys.stdin.readline() if sys.stdin is not None else ""
    return line.rstrip("\r\n")


def _address(ctx: Context) -> api.MasterAddress:
    """Where the master is (-m, DET_MASTER, master.json, the stored login); no request made."""
    return api.discover_master(ctx.master, user=ctx.user)


def _interactive(address: api.MasterAddress, token: str | None) -> api.Session:
    return api.Session(
        address.url,
        token,
        address=address,
        connect_retries=_session.INTERACTIVE_CONNECT_RETRIES,
        connect_timeout=_session.INTERACTIVE_CONNECT_TIMEOUT_S,
    )


def _sign_in(address: api.MasterAddress, username: str, password: str) -> tuple[str, str]:
    """(name, token): a user's session, or the master token given as the password."""
    session = _interactive(address, None)
    try:
        answer = session.post("/auth/login", {"username": username, "password": password})
        return str(answer["user"]["username"]), str(answer["token"])
    except api.Unauthorized as e:
        if "deactivated" in e.message:
            raise CliError(e.message) from e
    finally:
        session.close()
    owner = _interactive(address, password)
    try:
        owner.get("/master")  # the master token: the owner account, as before users
    except api.Unauthorized as e:
        raise CliError(
            "invalid username and/or password: the master at "
            f"{address.url} accepted neither (the master's own token, DET_MASTER_TOKEN in "
            "JupyterLab's kernels or `token` in <root_dir>/master.json, works as the "
            "password too)"
        ) from e
    finally:
        owner.close()
    return username, password


def login(args: argparse.Namespace, ctx: Context) -> int:
    address = _address(ctx)
    username = args.username or ctx.user or default_username()
    password = _read_password(f"Password for user '{username}': ")
    if not password:
        raise CliError("no password given; give the user's password (or the master's user token)")
    name, token = _sign_in(address, username, password)
    try:
        authentication.check_password_complexity(password)
    except ValueError as e:
        authentication.warn_about_complexity(e)  # signed in all the same, as in Determined
    store = authentication.TokenStore(address.url)
    store.set_token(name, token)
    store.set_active(name)
    return 0


def _end_session(url: str, token: str | None) -> None:
    """End a stored session on the master too (best effort: the master may be gone)."""
    if not token or not token.startswith("session."):
        return
    session = api.Session(url, token, connect_retries=0, connect_timeout=2.0, timeout=5.0)
    try:
        session.post("/auth/logout")
    except (api.APIError, OSError):
        pass
    finally:
        session.close()


def logout(args: argparse.Namespace, ctx: Context) -> int:
    url = ctx.master or _address(ctx).url
    store = authentication.TokenStore(url)
    if args.all:
        users = store.get_all_users()
    else:
        user = ctx.user or store.get_active_user()
        users = [user] if user is not None and store.get_token(user) is not None else []
    if not users:
        print(f"Not logged in to {store.master_url}; nothing to log out.", file=sys.stderr)
        return 0
    for user in users:
        _end_session(store.master_url, store.get_token(user))
        store.drop_user(user)
    if args.all:
        store.clear_active()
    return 0


def whoami(args: argparse.Namespace, ctx: Context) -> int:
    me = ctx.session.get("/me")["user"]  # the token is checked: a wrong one is reported
    name = me["username"]
    if me["id"] == 1:
        # The master token (the owner account): the name it was stored under, as before users.
        address = ctx.address
        name = (address.user if address is not None else None) or ctx.user or name
    print(f"You are logged in as user '{name}'")
    return 0


def _user_path(ctx: Context, username: str) -> str:
    """`/users/{id}` of the user named `username` (404 names the user)."""
    quoted = urllib.parse.quote(username, safe="")
    user = ctx.session.get(f"/users/{quoted}/by-username")["user"]
    return f"/users/{user['id']}"


def _check_complexity(password: str) -> None:
    """Determined's password rules, before anything is sent (CliError lists each rule)."""
    try:
        authentication.check_password_complexity(password)
    except ValueError as e:
        raise CliError(f"the password does not meet the requirements:\n{e}") from None


def create(args: argparse.Namespace, ctx: Context) -> int:
    password = args.password
    if password is None:
        password = _read_password(f"Password for user '{args.username}': ", confirm=True)
    _check_complexity(password)
    body = {"user": {"username": args.username, "admin": bool(args.admin)}, "password": password}
    ctx.session.post("/users", body)
    return 0


def list_users(args: argparse.Namespace, ctx: Context) -> int:
    params = {} if args.all else {"active": "true"}
    users = ctx.session.get("/users", params=params)["users"]
    print_table(
        ["User ID", "Username", "Display Name", "Admin", "Active", "Remote"],
        [
            [u["id"], u["username"], u.get("displayName") or "", u["admin"], u["active"], False]
            for u in users
        ],
        as_csv=False,
    )
    return 0


def _set_active(ctx: Context, username: str, active: bool) -> int:
    ctx.session.patch(_user_path(ctx, username), {"active": active})
    return 0


def activate(args: argparse.Namespace, ctx: Context) -> int:
    return _set_active(ctx, args.username, True)


def deactivate(args: argparse.Namespace, ctx: Context) -> int:
    return _set_active(ctx, args.username, False)


def change_password(args: argparse.Namespace, ctx: Context) -> int:
    username = args.target_user or ctx.user or ctx.session.get("/me")["user"]["username"]
    password = _read_password(f"New password for user '{username}': ", confirm=True)
    if not password:
        raise CliError("no password given")
    _check_complexity(password)
    ctx.session.post(f"{_user_path(ctx, username)}/password", password)
    if args.target_user is None and ctx.session.token and ctx.session.token.startswith("session."):
        # One's own password: sign in again with it, as Determined does.
        address = _address(ctx)
        name, token = _sign_in(address, username, password)
        store = authentication.TokenStore(address.url)
        store.set_token(name, token)
        store.set_active(name)
    return 0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("user", aliases=["u"], help="sign in; manage users")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", aliases=["ls"], help="list users")
    p.add_argument("-a", "--all", action="store_true", help="list inactive users too")
    p.set_defaults(handler=list_users)

    p = verbs.add_parser(
        "login", help="sign in with a password and store the session for later commands"
    )
    p.add_argument(
        "username", nargs="?", default=None, help="name of user to log in as (default: DET_USER)"
    )
    p.set_defaults(handler=login)

    p = verbs.add_parser("logout", help="end the stored login for this master")
    p.add_argument(
        "-a", "--all", action="store_true", help="log out of all cached sessions for this master"
    )
    p.set_defaults(handler=logout)

    p = verbs.add_parser("whoami", help="print the active user")
    p.set_defaults(handler=whoami)

    p = verbs.add_parser("create", help="create a user (admins)")
    p.add_argument("username", help="name of new user")
    p.add_argument("--admin", action="store_true", help="give new user admin rights")
    p.add_argument("--password", help="password of new user (default: asked, or stdin)")
    p.set_defaults(handler=create)

    p = verbs.add_parser("activate", help="let a user sign in again (admins)")
    p.add_argument("username", help="name of user to activate")
    p.set_defaults(handler=activate)

    p = verbs.add_parser("deactivate", help="refuse a user's sign-ins and tokens (admins)")
    p.add_argument("username", help="name of user to deactivate")
    p.set_defaults(handler=deactivate)

    p = verbs.add_parser("change-password", help="change a user's password")
    p.add_argument(
        "target_user", nargs="?", default=None, help="name of user to change password of"
    )
    p.set_defaults(handler=change_password)
