"""What runs in a notebook's kernel: the magics (`%%det_submit`, `%det`), the notebook
exporter, the experiment widget's output, papermill notebook trials.

Importing this package imports no IPython: the magics are loaded by `register_magics` (what
`%load_ext jupyter_determined` calls), so the Jupyter server can use the exporter's pure
functions (its export preview) without a kernel's modules.
"""

from __future__ import annotations

from typing import Any

from jupyter_determined.kernel._current_notebook import current_notebook_script
from jupyter_determined.kernel._export import (
    COMM_TARGET,
    SKIP_TAG,
    ExportedScript,
    NotebookExportError,
    cells_to_script,
    export_notebook_script,
)
from jupyter_determined.kernel._papermill import submit_notebook
from jupyter_determined.kernel._widget import ExperimentWidget, show_experiment


def register_magics(ipython: Any) -> None:
    """Register `%%det_submit` and `%det` with `ipython`."""
    from jupyter_determined.kernel._magics import register_magics as register

    register(ipython)


def notebook_submitted(experiment_id: int, *, show_widget: bool = True) -> Exception:
    """Show the experiment's widget; return the exception that stops the submitting cell."""
    from jupyter_determined.kernel._magics import notebook_submitted as submitted

    return submitted(experiment_id, show_widget=show_widget)


__all__ = [
    "COMM_TARGET",
    "ExperimentWidget",
    "ExportedScript",
    "NotebookExportError",
    "SKIP_TAG",
    "cells_to_script",
    "current_notebook_script",
    "export_notebook_script",
    "notebook_submitted",
    "register_magics",
    "show_experiment",
    "submit_notebook",
]
