"""What a context leaves out by default, before its `.detignore` is read.

A notebook's context is usually `.`, the notebook's own directory, which also holds what working
there leaves behind: checkpoints downloaded with Determined's default path (`checkpoints/<uuid>`),
JupyterLab's autosaves, bytecode caches, a git repository. None of it is code the trial needs,
and a downloaded checkpoint alone can push the context over its size limit, so packing skips
these names. The rules come first, so a `.detignore` line overrides them (the last matching rule
wins): `!checkpoints/` packs a top-level `checkpoints/` directory again.
"""

from __future__ import annotations

# gitignore syntax, as in `.detignore`. `checkpoints/` is anchored to the context root (where
# `Checkpoint.download()` in Determined writes); a package named `checkpoints` deeper down is code.
DEFAULT_IGNORE: tuple[str, ...] = (
    "/checkpoints/",
    ".ipynb_checkpoints/",
    "__pycache__/",
    ".git/",
)


def default_ignore_lines() -> list[str]:
    """The default rules as `.detignore` lines (a fresh list: callers may extend it)."""
    return list(DEFAULT_IGNORE)
