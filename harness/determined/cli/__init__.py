"""The `det` command line: `det [-m URL] <noun> <verb> ...` (see docs/cli.md)."""

from determined.cli._attach import TrialKernel, attach_trial
from determined.cli._base import CliError
from determined.cli.main import build_parser, main

__all__ = ["CliError", "TrialKernel", "attach_trial", "build_parser", "main"]
