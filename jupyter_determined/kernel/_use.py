""" "Use in notebook" from the kernel: `%det use` and `ExperimentWidget.use_in_notebook()` put the
cell that downloads and loads a checkpoint into the notebook as the next cell
(`set_next_input`), where JupyterLab's button is not at hand (the classic notebook, VS Code, a
console). The cell's code is the master's (`GET /checkpoints/{uuid}/snippet`), the same as the
button's (determined.common.checkpoint_snippets)."""

from __future__ import annotations

from typing import Any


def best_checkpoint_uuid(session: Any, experiment_id: int) -> str:
    """The experiment's COMPLETED checkpoint with the best searcher metric (the SDK's rule).

    Raises:
        ValueError: the experiment has no COMPLETED checkpoint.
    """
    from determined.common.experimental.experiment import Experiment

    found = Experiment(experiment_id, session).list_checkpoints(max_results=1)
    if not found:
        raise ValueError(
            f"experiment {experiment_id} has no checkpoint to use yet (none COMPLETED)"
        )
    return str(found[0].uuid)


def insert_checkpoint_cell(session: Any, uuid: str, ipython: Any = None) -> dict:
    """Make the checkpoint's cell the notebook's next cell; the snippet `{kind, code}`.

    Args:
        session: a session with the master.
        uuid: the checkpoint.
        ipython: the shell (default: the running one).
    """
    snippet: dict = session.get(f"/checkpoints/{uuid}/snippet")
    if ipython is None:
        from IPython import get_ipython

        ipython = get_ipython()
    if ipython is None:
        raise RuntimeError("Use in notebook needs an IPython kernel; print(snippet['code'])")
    ipython.set_next_input(snippet["code"], replace=False)
    return snippet


__all__ = ["best_checkpoint_uuid", "insert_checkpoint_cell"]
