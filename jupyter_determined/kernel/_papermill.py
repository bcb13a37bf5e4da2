"""Notebooks as trials (user side): submit a notebook that papermill runs in every trial.

The trial side is `determined.exec.notebook` (in the harness, which never imports this
package): it injects the hyperparameters into the `parameters` cell, runs the notebook, and
writes the executed copy to `<root_dir>/trials/<trial id>/<stem>.run-<run id>.ipynb`.
"""

from __future__ import annotations

import base64
import copy
import os
import shlex
from pathlib import Path
from typing import Any

NOTEBOOK_RUNNER = "python3 -m determined.exec.notebook"


def notebook_entrypoint(notebook: str) -> str:
    """The entrypoint that runs `notebook` (relative to the context directory) as the trial."""
    return f"{NOTEBOOK_RUNNER} {shlex.quote(notebook)}"


def is_notebook_entrypoint(entrypoint: Any) -> bool:
    """`train.ipynb`, or `python3 -m determined.exec.notebook train.ipynb`."""
    if not isinstance(entrypoint, str):
        return False
    words = shlex.split(entrypoint)
    return (len(words) == 1 and words[0].endswith(".ipynb")) or entrypoint.strip().startswith(
        NOTEBOOK_RUNNER
    )


def executed_notebooks(root_dir: str | os.PathLike, trial_id: int) -> list[Path]:
    """The executed notebooks a trial left, oldest run first."""
    directory = Path(root_dir) / "trials" / str(trial_id)
    return sorted(
        directory.glob("*.run-*.ipynb"), key=lambda path: int(path.stem.rsplit("-", 1)[-1])
    )


def submit_notebook(
    notebook: str | os.PathLike,
    config: dict,
    *,
    context_dir: str | os.PathLike | None = None,
    session: Any = None,
) -> dict:
    """Create an experiment whose trials run `notebook` with papermill; returns the experiment.

    The context is the notebook's directory unless `context_dir` is given (the notebook must
    be inside it).
    """
    from determined.common import context as context_mod
    from determined.common import expconf

    notebook = Path(notebook).absolute()
    context = Path(context_dir).absolute() if context_dir is not None else notebook.parent
    try:
        relative = notebook.relative_to(context)
    except ValueError:
        raise ValueError(
            f"notebook {notebook} is not inside the context directory {context}"
        ) from None
    config = copy.deepcopy(config)
    config["entrypoint"] = notebook_entrypoint(relative.as_posix())
    config.setdefault("name", notebook.stem)
    expconf.check(config)
    packed = context_mod.pack(str(context))
    own_session = session is None
    if session is None:
        from determined.common.api import Session, discover_master

        address = discover_master()
        session = Session(address.url, address.token)
    try:
        body = {
            "config": config,
            "context": base64.b64encode(packed).decode("ascii"),
            "activate": True,
            "notebook": {"path": str(notebook), "cell_ids": []},
        }
        return session.post("/experiments", body)["experiment"]
    finally:
        if own_session:
            session.close()


__all__ = [
    "NOTEBOOK_RUNNER",
    "executed_notebooks",
    "is_notebook_entrypoint",
    "notebook_entrypoint",
    "submit_notebook",
]
