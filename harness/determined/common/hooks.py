"""Hooks: what the harness asks of the packages it must not import.

The harness talks to the master over HTTP only and never imports `master_lite` or
`jupyter_determined` (tests/test_import_rules.py). The few things only they have, it asks for
here by name, and the package that has them registers a function:

* `SEARCH_PREVIEW`: `(expanded_config) -> str`, the text `det preview-search` prints, computed
  in-process by the master's searchers (master_lite; no master needs to run);
* `NOTEBOOK_SCRIPT`: `() -> (script, notebook_path | None, cell_ids)`, the notebook this kernel
  runs exported as one script, for the Native API called in a notebook (jupyter_determined);
* `NOTEBOOK_SUBMITTED`: `(experiment_id) -> BaseException`, shows the experiment's widget and
  returns the exception that stops the cell (jupyter_determined).

A package provides hooks with a module named `_determined_hooks` at its top
(`master_lite/_determined_hooks.py`) that calls `register()` when imported; it should import
nothing heavy at module level. The first time a hook is asked for and not registered, `get()`
imports such modules found on `sys.path`, in path order, until one registers it. This is the
naming-convention way of discovering plugins (packaging.python.org, "Creating and discovering
plugins"): unlike entry points it needs no package metadata, so it works in an editable
checkout without a reinstall, and where the sources are put on `sys.path` by a .pth file or
PYTHONPATH (.venv-tf215, trial containers).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

SEARCH_PREVIEW = "search_preview"
NOTEBOOK_SCRIPT = "notebook_script"
NOTEBOOK_SUBMITTED = "notebook_submitted"
PROVIDER_MODULE = "_determined_hooks"

logger = logging.getLogger("determined.common.hooks")

_registered: dict[str, Callable[..., Any]] = {}
_imported_providers: set[str] = set()


def register(name: str, hook: Callable[..., Any]) -> None:
    """Make `hook` the answer to `get(name)` in this process (a later registration wins)."""
    if not callable(hook):
        raise ValueError(f"hook: {name} must be callable, got {type(hook).__name__}")
    _registered[name] = hook


def get(name: str) -> Callable[..., Any] | None:
    """The hook registered under `name`, looking for providers on first use; None if no
    package here provides it."""
    if name not in _registered:
        _import_providers_until(name)
    return _registered.get(name)


def provider_modules(path: Iterable[str] | None = None) -> list[str]:
    """`<package>._determined_hooks` for each package on `path` (default `sys.path`) that has
    one, in path order; a package name found twice counts once (Python imports the first)."""
    found: list[str] = []
    seen: set[str] = set()
    for entry in sys.path if path is None else path:
        directory = entry or os.getcwd()
        try:
            names = sorted(os.listdir(directory))
        except OSError:  # a missing directory, a zip file
            continue
        for name in names:
            package = os.path.join(directory, name)
            if (
                name.isidentifier()
                and name not in seen
                and os.path.isfile(os.path.join(package, PROVIDER_MODULE + ".py"))
                and os.path.isfile(os.path.join(package, "__init__.py"))
            ):
                seen.add(name)
                found.append(f"{name}.{PROVIDER_MODULE}")
    return found


def _import_providers_until(name: str) -> None:
    for module in provider_modules():
        if module in _imported_providers:
            continue
        _imported_providers.add(module)
        try:
            importlib.import_module(module)
        except Exception as exc:  # a broken provider must not break the others' hooks
            logger.warning(
                "the hook provider %s cannot be imported: %s: %s", module, type(exc).__name__, exc
            )
        if name in _registered:
            return


__all__ = [
    "NOTEBOOK_SCRIPT",
    "NOTEBOOK_SUBMITTED",
    "PROVIDER_MODULE",
    "SEARCH_PREVIEW",
    "get",
    "provider_modules",
    "register",
]
