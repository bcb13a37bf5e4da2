"""`det preview-search CONFIG`: what the searcher would do, computed locally (no master needed)."""
from __future__ import annotations

import argparse
from typing import Any

from determined.cli._base import CliError, Context
from determined.common import expconf


def preview(args: argparse.Namespace, ctx: Context) -> int:
    config = expconf.load_file(args.config_file)
    if args.config:
        config = expconf.apply_overrides(config, args.config)
    expconf.check(config)
    try:
        # The searchers live with the master; the preview is the one CLI command that runs them
        # in-process, so the import stays here and lazy.
        from master_lite import searcher
    except ImportError as e:
        raise CliError(f"preview-search needs the master_lite package, which is not importable ({e})") from e
    print(searcher.format_preview(expconf.apply_defaults(config)))
    return 0


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("preview-search", help="preview the trials and lengths a searcher would create")
    p.add_argument("config_file", metavar="CONFIG")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="override a config field (repeatable)")
    p.set_defaults(handler=preview)
