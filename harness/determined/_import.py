"""`det.import_from_path(path)`: import modules from a directory (e.g. a checkpoint's code) in a block.

Determined 0.21+. Inside the `with` block the directory comes first on `sys.path`, and modules that
were imported from the current directory are hidden, so `import model_def` finds the directory's
`model_def.py` even when another `model_def` is already imported. When the block ends, every module
imported from the directory is dropped from `sys.modules`, `sys.path` is restored, and the hidden
modules come back: names bound inside the block keep the modules they were given.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Iterator
from types import ModuleType

_lock = threading.Lock()
_active = False


def _module_dir(module: ModuleType) -> str | None:
    """The directory a module was imported from (a package: the directory holding the package)."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    directory, name = os.path.split(os.path.abspath(file))
    if name.startswith("__init__."):
        directory = os.path.dirname(directory)
    return directory


def modules_from_dir(path: str) -> set[str]:
    """Names in `sys.modules` imported from `path`, with their submodules (and cached misses)."""
    directory = os.path.abspath(path)
    found: set[str] = set()
    for name, module in sorted(sys.modules.items()):  # parents sort before their submodules
        if module is None:  # a cached failed import
            found.add(name)
        elif _module_dir(module) == directory or name.rpartition(".")[0] in found:
            found.add(name)
    return found


@contextlib.contextmanager
def import_from_path(path: str | os.PathLike[str]) -> Iterator[None]:
    """Import from the directory `path` within the block; clean `sys.modules` and `sys.path` after.

    Example (a checkpoint holding an older `model_def.py` than the current one)::

        import model_def as new_model_def

        with det.import_from_path(checkpoint_dir):
            import model_def as old_model_def

        old_model = old_model_def.build_model()

    No `__pycache__` is written while the block runs (a checkpoint directory stays as it was).
    Not reentrant: nesting, or using it from two threads at once, raises `RuntimeError`.
    """
    global _active
    with _lock:
        if _active:
            raise RuntimeError(
                "det.import_from_path does not support nesting or calling from multiple threads"
            )
        _active = True
    directory = os.path.abspath(os.fspath(path))
    old_path, old_dont_write = sys.path, sys.dont_write_bytecode
    hidden: dict[str, ModuleType] = {}
    try:
        for local in ("", os.getcwd()):
            if local in sys.path:
                sys.path = [entry for entry in sys.path if entry != ""]
                for name in modules_from_dir(local or os.getcwd()):
                    module = sys.modules.pop(name)
                    if module is not None:
                        hidden[name] = module
        sys.path = [directory, *sys.path]
        sys.dont_write_bytecode = True
        yield
    finally:
        for name in modules_from_dir(directory):
            sys.modules.pop(name, None)
        sys.path = old_path
        sys.dont_write_bytecode = old_dont_write
        sys.modules.update(hidden)
        with _lock:
            _active = False


def import_module_in(code_dir: str | os.PathLike[str], name: str) -> ModuleType:
    """Module `name` imported from `code_dir` (as `import_from_path`) when it is a directory,
    else from `sys.path` as usual: a checkpoint's trial class, with or without its `code/`."""
    if os.path.isdir(code_dir):
        with import_from_path(code_dir):
            return importlib.import_module(name)
    return importlib.import_module(name)
