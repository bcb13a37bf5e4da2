"""Jupyter glue for Determined: the master inside the Jupyter server, IPython magics
(`%load_ext jupyter_determined`), notebook export, live widgets, papermill notebook trials.

Where each part runs:

* `jupyter_determined.server`: in the Jupyter server (the extension hosting master_lite, its
  handlers, the TensorBoard proxy);
* `jupyter_determined.kernel`: in a notebook's kernel (magics, exporter, widget output,
  papermill trials);
* `jupyter_determined._contract`: the constants the Python side shares with the labextension
  (generated into `labextension/src/api/contract.generated.ts`);
* `jupyter_determined._demo`: `make demo`.

This module keeps the public names (`load_ipython_extension`, `show_experiment`, the exporter's
functions, the server extension's entry points) and imports the heavy parts only when used.
"""

from __future__ import annotations

from typing import Any

from jupyter_determined.kernel._current_notebook import current_notebook_script
from jupyter_determined.kernel._export import (
    ExportedScript,
    NotebookExportError,
    cells_to_script,
    export_notebook_script,
)

__version__ = "0.1.0"


def _jupyter_server_extension_points() -> list[dict]:
    from jupyter_determined.server._extension import DeterminedServerExtension

    return [{"module": "jupyter_determined", "app": DeterminedServerExtension}]


def _load_jupyter_server_extension(serverapp: Any) -> Any:
    """Loads the extension into `serverapp` (jupyter_server calls the app's own loader; this
    is for callers that load extensions by module)."""
    from jupyter_determined.server._extension import DeterminedServerExtension

    return DeterminedServerExtension._load_jupyter_server_extension(serverapp)


def _jupyter_labextension_paths() -> list[dict]:
    return [{"src": "labextension", "dest": "jupyter-determined"}]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext jupyter_determined`: the `%%det_submit` and `%det` magics."""
    from jupyter_determined.kernel._current_notebook import cell_counts
    from jupyter_determined.kernel._magics import register_magics

    register_magics(ipython)
    cell_counts.register(ipython)  # the prompts' numbers, for a failed trial's banner


def notebook_submitted(experiment_id: int, *, show_widget: bool = True) -> Exception:
    """For the Native API in a notebook: shows the widget, returns the exception to raise so
    the cell stops with one line (no traceback) and later cells do not run."""
    from jupyter_determined.kernel._magics import notebook_submitted as submitted

    return submitted(experiment_id, show_widget=show_widget)


def show_experiment(experiment_id: int, **kwargs: Any) -> Any:
    """Display (and return) the live widget of one experiment."""
    from jupyter_determined.kernel._widget import show_experiment as show

    return show(experiment_id, **kwargs)


__all__ = [
    "ExportedScript",
    "NotebookExportError",
    "cells_to_script",
    "current_notebook_script",
    "export_notebook_script",
    "load_ipython_extension",
    "notebook_submitted",
    "show_experiment",
]
