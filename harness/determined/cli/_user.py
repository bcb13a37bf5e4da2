"""`det user login|logout|whoami` (alias `u`).

master-lite has one user, whose password is the master's user token (`DET_MASTER_TOKEN` of
JupyterLab's kernels, `token` of `<root_dir>/master.json`). `login` checks the token against
the master, then stores it where Determined keeps its logins (`~/.config/determined/auth.json`,
see `determined.common.api.authentication`); later commands use it when no other token is found.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from determined.cli._base import CliError, Context
from determined.common import api
from determined.common.api import _session, authentication


def default_username() -> str:
    """The name of master-lite's one user when none is given: DET_USER, else the login name."""
    name = os.environ.get("DET_USER")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "determined"


def _read_password(username: str) -> str:
    """Determined's prompt on a terminal; otherwise the first line of standard input, so
    `det user login < token-file` and pipes work without a terminal."""
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(f"Password for user '{username}': ")
    line = sys.stdin.readline() if sys.stdin is not None else ""
    return line.rstrip("\r\n")


def _address(ctx: Context) -> api.MasterAddress:
    """Where the master is (-m, DET_MASTER, master.json, the stored login); no request made."""
    return api.discover_master(ctx.master, user=ctx.user)


def login(args: argparse.Namespace, ctx: Context) -> int:
    address = _address(ctx)
    username = args.username or ctx.user or default_username()
    password = _read_password(username)
    if not password:
        raise CliError("no password given; the password is the master's user token")
    session = api.Session(
        address.url,
        password,
        address=address,
        connect_retries=_session.INTERACTIVE_CONNECT_RETRIES,
        connect_timeout=_session.INTERACTIVE_CONNECT_TIMEOUT_S,
    )
    try:
        session.get("/master")
    except api.Unauthorized as e:
        raise CliError(
            f"invalid username and/or password: the master at {address.url} did not accept "
            "that token (its user token is DET_MASTER_TOKEN in JupyterLab's kernels, or "
            "`token` in <root_dir>/master.json of the master)"
        ) from e
    finally:
        session.close()
    store = authentication.TokenStore(address.url)
    store.set_token(username, password)
    store.set_active(username)
    return 0


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
        store.drop_user(user)
    if args.all:
        store.clear_active()
    return 0


def whoami(args: argparse.Namespace, ctx: Context) -> int:
    ctx.session.get("/master")  # the token is checked: a wrong one is reported, not hidden
    address = ctx.address
    name = (address.user if address is not None else None) or ctx.user or default_username()
    print(f"You are logged in as user '{name}'")
    return 0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("user", aliases=["u"], help="log in to a master")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser(
        "login",
        help="check the master's user token (the password) and store it for later commands",
    )
    p.add_argument(
        "username", nargs="?", default=None, help="name of user to log in as (default: DET_USER)"
    )
    p.set_defaults(handler=login)

    p = verbs.add_parser("logout", help="forget the stored login for this master")
    p.add_argument(
        "-a", "--all", action="store_true", help="log out of all cached sessions for this master"
    )
    p.set_defaults(handler=logout)

    p = verbs.add_parser("whoami", help="print the active user")
    p.set_defaults(handler=whoami)
