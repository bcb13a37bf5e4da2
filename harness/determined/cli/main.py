"""`det` entry point: parse, dispatch to a handler, turn every expected failure into one line.

Handlers are `handler(args, ctx) -> int`. Failures a user can act on (no master, an API error,
an invalid config, an unsafe or oversized context) print readable lines on stderr and exit 1,
never a traceback; `DET_DEBUG=1` re-raises so developers get the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from determined.cli import (
    _checkpoint,
    _experiment,
    _image,
    _info,
    _job,
    _model,
    _preview,
    _resource_pool,
    _task,
    _tensorboard,
    _trial,
    _user,
    _workspace,
)
from determined.cli._base import CliError, Context, NotSupported
from determined.common import api, expconf
from determined.common import context as context_mod


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="det",
        description="Determined-compatible command line for master_lite.",
        epilog="The master is -m, else DET_MASTER (+DET_MASTER_TOKEN), else <root_dir>/master.json "
        "of a running master-lite, else the master of the login stored by `det user login`.",
    )
    parser.add_argument(
        "-m", "--master", metavar="URL", help="master address (default: DET_MASTER or master.json)"
    )
    parser.add_argument(
        "-u",
        "--user",
        metavar="NAME",
        help="use this user's stored login (master-lite has one user)",
    )
    parser.add_argument(
        "-v", "--version", action="version", version=f"det {_info.client_version()}"
    )
    nouns = parser.add_subparsers(dest="noun", metavar="NOUN")
    _experiment.add_parser(nouns)
    _trial.add_parser(nouns)
    _checkpoint.add_parser(nouns)
    _model.add_parser(nouns)
    _tensorboard.add_parser(nouns)
    _task.add_parser(nouns)
    _preview.add_parser(nouns)
    _user.add_parser(nouns)
    _workspace.add_parser(nouns)
    _info.add_parser(nouns)
    _image.add_parser(nouns)
    _resource_pool.add_parser(nouns)
    _job.add_parser(nouns)
    return parser


def _debug() -> bool:
    return os.environ.get("DET_DEBUG", "").lower() in ("1", "true", "yes")


def _fail(*lines: str) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    ctx = Context(args.master, args.user)
    try:
        return int(handler(args, ctx) or 0)
    except KeyboardInterrupt:
        return 130
    except (
        BrokenPipeError
    ):  # `det ... | head`: stop quietly, and keep Python's final flush quiet too
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout without a file descriptor (captured)
            pass
        return 0
    except Exception as e:
        if _debug():
            raise
        return _report(e, ctx)
    finally:
        ctx.close()


def _report(error: Exception, ctx: Context | None = None) -> int:
    if isinstance(error, api.MasterNotFound):
        return _fail(str(error))
    if isinstance(error, NotSupported):
        return _fail(str(error))
    if isinstance(error, api.Unauthorized):
        address = ctx.address if ctx is not None else None
        if address is not None and address.token_source == api.HUB_TOKEN_ENV:
            return _fail(
                f"Error: {error.message}",
                f"  {address.url} refused your JupyterHub API token ({api.HUB_TOKEN_ENV}): "
                "DET_MASTER must name the master run as the Hub's service "
                "(<hub url>/services/determined), and the token must carry the scope "
                "access:services!service=determined; or run `det user login`",
            )
        if address is not None and address.user is not None:
            return _fail(
                f"Error: {error.message}",
                f"  the login stored for {address.url} ({address.token_source}) is no longer "
                "valid: run `det user login` again, or set DET_MASTER_TOKEN",
            )
        return _fail(
            f"Error: {error.message}",
            "  the master wants its token: set DET_MASTER_TOKEN or run `det user login` (a "
            "standalone master-lite writes it to <root_dir>/master.json)",
        )
    if isinstance(error, api.APIError):
        return _fail(f"Error: {error.message}", *(f"  {e}" for e in error.errors))
    if isinstance(error, expconf.InvalidConfig):
        if len(error.errors) == 1:
            return _fail(f"Error: invalid experiment config: {error.errors[0]}")
        return _fail(
            f"Error: invalid experiment config ({len(error.errors)} errors):", *error.errors
        )
    if isinstance(error, (context_mod.ContextError, CliError, api.TokenStoreError)):
        return _fail(f"Error: {error}")
    if isinstance(error, OSError):
        return _fail(f"Error: {error}")
    return _fail(f"Error: {type(error).__name__}: {error}", "(set DET_DEBUG=1 for the traceback)")


if __name__ == "__main__":
    sys.exit(main())
