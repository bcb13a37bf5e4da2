"""Fixtures of the Jupyter tests.

The real Jupyter server processes (`lab_server`, `start_jupyter`) come from tests._support.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def shell(monkeypatch):
    """A fresh in-process IPython shell with no notebook behind it (memory-only history, no
    frontend snapshot): what the export sees from a plain kernel. Files needing more override it."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from jupyter_determined.kernel._current_notebook import frontend_notebook

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(frontend_notebook, "snapshot", None)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    instance = InteractiveShell.instance(config=config)
    yield instance
    InteractiveShell.clear_instance()
