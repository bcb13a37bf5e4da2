"""Submitting a notebook from the kernel: the config `%%det_submit` sends (CONFIG resolved, our
entrypoint, a name, test mode, a kernel by default in a server that says so), the context packed
with the exported script, and the POST; also the session with the master and how a missing one
reads. The magics (`_magics`) parse the line and show the result.
"""

from __future__ import annotations

import base64
import copy
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from jupyter_determined.kernel._export import ExportedScript

SCRIPT_NAME = "_det_notebook_cell.py"  # the exported script inside the uploaded context
DEFAULT_CONFIG: dict = {
    "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True, "max_length": 1},
    "max_restarts": 0,
}


def master_session() -> Any:
    """A session with the master; a missing or unreachable master fails within about a second
    with what was tried and how to start one (`determined.common.api.connect`)."""
    from determined.common.api import connect

    return connect(interactive=True)


def master_problem(exc: Exception) -> str | None:
    """The user-facing text of a missing or unreachable master, else None."""
    from determined.common.api import MasterNotFound, MasterUnreachable

    if isinstance(exc, (MasterNotFound, MasterUnreachable)):
        return str(exc)
    return None


def resolve_config(spec: str | None, user_ns: dict) -> dict:
    """CONFIG: a variable holding a dict or YAML text, else a file, else the default config."""
    from determined.common import expconf

    if not spec:
        return copy.deepcopy(DEFAULT_CONFIG)
    if spec in user_ns:
        value = user_ns[spec]
        if isinstance(value, dict):
            return copy.deepcopy(value)
        if isinstance(value, str):
            loaded = expconf.load(value, source=f"variable {spec}")
            if isinstance(loaded, dict):
                return loaded
        raise UsageError(
            f"CONFIG {spec!r}: the variable holds a {type(value).__name__}; "
            "expected a config dict or YAML text"
        )
    if os.path.isfile(spec):
        return expconf.load_file(spec)
    raise UsageError(
        f"CONFIG {spec!r} is neither a variable nor a file; pass a YAML file, or "
        "the name of a variable holding the config dict"
    )


def build_config(
    config: dict, *, name: str | None, notebook_path: str | None, test: bool = False
) -> dict:
    """The config to submit: our entrypoint, a name, test mode; checked (all errors at once)."""
    from determined.common import expconf

    config = copy.deepcopy(config)
    if config.get("entrypoint"):
        print(
            f"note: the config's entrypoint {config['entrypoint']!r} is replaced by the "
            "exported notebook script",
            file=sys.stderr,
        )
    config["entrypoint"] = f"python3 {SCRIPT_NAME}"
    _default_to_kernel(config)
    if name:
        config["name"] = name
    elif not config.get("name") and notebook_path:
        config["name"] = Path(notebook_path).stem
    if test:
        config = expconf.test_mode_config(config)
    expconf.check(config)
    return config


def _default_to_kernel(config: dict) -> None:
    """In a Jupyter server that says so (`notebook_trials_in_kernels`, on by default), the trial
    runs in a kernel unless the config picks where it runs or needs several slots."""
    if os.environ.get("DET_NOTEBOOK_TRIALS_IN_KERNELS") != "1":
        return
    environment = config.get("environment")
    if environment is not None and not isinstance(environment, dict):
        return  # expconf.check names the problem
    environment = environment or {}
    if "kernel" in environment or environment.get("image"):
        return
    slots = (config.get("resources") or {}).get("slots_per_trial")
    if isinstance(slots, int) and slots > 1:
        return
    config["environment"] = {**environment, "kernel": {}}


def pack_with_script(context_dir: str, script: str) -> bytes:
    """`context_dir` packed (honouring .detignore) with the exported script at its top level."""
    from determined.common import context as context_mod

    if not os.path.isdir(context_dir):
        raise UsageError(f"--context {context_dir!r} is not a directory")
    if os.path.exists(os.path.join(context_dir, SCRIPT_NAME)):
        raise UsageError(
            f"{context_dir}/{SCRIPT_NAME} exists; it is the name of the exported "
            "script: rename or .detignore it"
        )
    with tempfile.TemporaryDirectory(prefix="det-notebook-") as tmp:
        path = Path(tmp, SCRIPT_NAME)
        path.write_text(script, encoding="utf-8")
        return context_mod.pack(context_dir, includes=[str(path)])


def submit_exported(
    exported: ExportedScript,
    config: dict,
    *,
    context_dir: str = ".",
    archived: bool = False,
    session: Any = None,
) -> dict:
    """POST the experiment; the exported script, notebook path and cell ids go along."""
    packed = pack_with_script(context_dir, exported.script)
    own_session = session is None
    session = session or master_session()
    try:
        body = {
            "config": config,
            "context": base64.b64encode(packed).decode("ascii"),
            "activate": True,
            "archived": archived,
            "notebook": exported.notebook_field(),
        }
        return session.post("/experiments", body)["experiment"]
    finally:
        if own_session:
            session.close()


__all__ = [
    "DEFAULT_CONFIG",
    "SCRIPT_NAME",
    "build_config",
    "master_problem",
    "master_session",
    "pack_with_script",
    "resolve_config",
    "submit_exported",
]
