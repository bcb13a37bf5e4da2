"""`det preview-search CONFIG`: what the searcher would do, computed locally (no master needed)."""

from __future__ import annotations

import argparse
from typing import Any

from determined.cli._base import CliError, Context
from determined.common import expconf, hooks


def preview(args: argparse.Namespace, ctx: Context) -> int:
    config = expconf.load_file(args.config_file)
    if args.config:
        config = expconf.apply_overrides(config, args.config)
    expconf.check(config)
    # The searchers live with the master; the preview is the one CLI command that runs them
    # in-process, through the hook the master package registers.
    search_preview = hooks.get(hooks.SEARCH_PREVIEW)
    if search_preview is None:
        raise CliError(
            "preview-search runs the master's searchers, and no master package "
            "(master_lite, part of jupyter-determined) is importable here: install "
            "jupyter-determined in this environment"
        )
    print(search_preview(expconf.apply_defaults(config)))
    return 0


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "preview-search", help="preview the trials and lengths a searcher would create"
    )
    p.add_argument("config_file", metavar="CONFIG")
    p.add_argument(
        "--config",
        action="append",
        metavar="KEY=VALUE",
        help="override a config field (repeatable)",
    )
    p.set_defaults(handler=preview)
