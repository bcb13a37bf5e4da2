"""The Native API's two halves: submitting the user's own script, and re-executing it in the trial.

Submit (user environment, `local=False`): the context directory is packed, the config gets the
native defaults, `internal.native.command` and the entrypoint `python3 -m determined.exec.native`,
and one `POST /experiments` creates the experiment.

Trial (`determined.exec.native`): the same script runs again from the top under `runpy`; the
Native entry points see `RunpyGlobals` initialised, return a context holding this trial's
hyperparameters, and the script is stopped with `StopLoadingImplementation` once training is
about to start (`model.fit(...)` or `det.experimental.create(...)`). The runner then drives the
registered training itself.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import pathlib
import random
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from determined.common import expconf, hooks, trial_checks

NATIVE_ENTRYPOINT = "python3 -m determined.exec.native"

# Determined 0.12.5-0.15 shallow-merged the user's config over these (user sections replace ours).
NATIVE_DEFAULTS: dict[str, Any] = {
    "searcher": {"name": "single", "max_length": {"batches": 100}},
    "scheduling_unit": 100,
    "resources": {"slots_per_trial": 1, "native_parallel": False},
    "optimizations": {
        "aggregation_frequency": 1,
        "average_aggregated_gradients": True,
        "average_training_metrics": False,
        "gradient_compression": False,
        "mixed_precision": "O0",
    },
}


class StopLoadingImplementation(Exception):
    """Raised inside the re-executed user script once the training definition is registered.

    It unwinds the rest of the script; `determined.exec.native` catches it and trains.
    """


class RunpyGlobals:
    """The state shared between `determined.exec.native` and the Native entry points in one process.

    `RunpyGlobals.get()` is None unless the runner is re-executing a user script. The entry
    point registers what to train (a ready-to-run function) exactly once.
    """

    _instance: RunpyGlobals | None = None

    def __init__(self) -> None:
        self.train_fn: Callable[[], Any] | None = None
        self.description: str | None = None

    @classmethod
    def get(cls) -> RunpyGlobals | None:
        return cls._instance

    @classmethod
    def is_initialized(cls) -> bool:
        return cls._instance is not None

    def __enter__(self) -> RunpyGlobals:
        if RunpyGlobals._instance is not None:
            raise RuntimeError("RunpyGlobals is already initialised: one native script per process")
        RunpyGlobals._instance = self
        return self

    def __exit__(self, *exc: Any) -> None:
        RunpyGlobals._instance = None

    def register(self, train_fn: Callable[[], Any], description: str) -> None:
        if self.train_fn is not None:
            raise RuntimeError(
                f"{description}: a training definition was already registered ({self.description}); "
                "Please don't load twice: call det.experimental.keras.init()/create() and fit() once per script"
            )
        self.train_fn, self.description = train_fn, description


# ---------------------------------------------------------------------------------------------
# commands and notebooks


def is_jupyter() -> bool:
    return "ipykernel" in sys.modules and any("ipykernel" in arg for arg in sys.argv[:1])


def default_command(context_dir: str) -> list[str]:
    """`sys.argv` with the script made relative to `context_dir` (what the trial re-executes)."""
    if is_jupyter() or not sys.argv or not sys.argv[0]:
        raise ValueError(
            "command=: running inside Jupyter/IPython there is no script to re-execute; pass "
            "command=['my_notebook.ipynb'] (or a .py script) relative to context_dir"
        )
    script = pathlib.Path(sys.argv[0]).resolve()
    base = pathlib.Path(context_dir).resolve()
    try:
        relative = script.relative_to(base)
    except ValueError:
        raise ValueError(
            f"context_dir={context_dir!r}: the running script {script} is not inside it; the trial "
            "re-executes the script from the uploaded context, so context_dir must contain it"
        ) from None
    return [relative.as_posix(), *sys.argv[1:]]


def check_command(command: Sequence[str]) -> list[str]:
    command = [str(part) for part in command]
    if not command or not command[0]:
        raise ValueError(
            "command=: must name the script to run, e.g. ['train.py', '--epochs', '3']"
        )
    if not command[0].endswith((".py", ".ipynb")):
        raise ValueError(
            f"command=: the script {command[0]!r} must be a .py file or a .ipynb notebook"
        )
    return command


def notebook_to_script(notebook: dict | str | os.PathLike) -> str:
    """Concatenate a notebook's code cells, dropping shell (`!`) and magic (`%`) lines."""
    document: dict = (
        notebook
        if isinstance(notebook, dict)
        else json.loads(pathlib.Path(notebook).read_text(encoding="utf-8"))
    )
    chunks = []
    for cell in document.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if text.lstrip().startswith("%%"):
            continue  # a cell magic makes the whole cell non-Python
        kept = [line for line in text.splitlines() if not line.lstrip().startswith(("!", "%"))]
        chunks.append("\n".join(kept))
    return "\n\n".join(chunks) + "\n"


# ---------------------------------------------------------------------------------------------
# configs


def load_config(config: dict | str | os.PathLike | None) -> dict:
    """A config given as a dict, YAML/JSON text, or a path to a YAML file."""
    if config is None:
        return {}
    if isinstance(config, dict):
        return copy.deepcopy(config)
    if isinstance(config, os.PathLike) or (
        isinstance(config, str) and "\n" not in config and os.path.isfile(config)
    ):
        return expconf.load_file(config)
    loaded = expconf.load(str(config))
    if not isinstance(loaded, dict):
        raise ValueError(
            f"config=: expected a mapping (YAML/JSON object), got {type(loaded).__name__}"
        )
    return loaded


def build_native_config(
    config: dict | str | None,
    command: Sequence[str],
    *,
    test: bool = False,
    defaults: dict | None = None,
    rng: random.Random | None = None,
    api: str | None = None,
) -> dict:
    """The config a native submission sends: defaults merged under the user's, native command set.

    With `test=True` it is the `--test` config (one trial, one batch, archived by the caller).
    `api` ("keras", "estimator", "pytorch": the Native API or Trial class submitting) is recorded
    as `internal.native.api`, so the master checks what that API needs (`global_batch_size`).
    Raises `expconf.InvalidConfig` listing every problem, those of the API included.
    """
    user = load_config(config)
    merged = {**copy.deepcopy(defaults if defaults is not None else NATIVE_DEFAULTS), **user}
    internal = dict(merged.get("internal") or {})
    internal["native"] = {"command": check_command(command)}
    if api is not None:
        internal["native"]["api"] = api
    merged["internal"] = internal
    merged["entrypoint"] = NATIVE_ENTRYPOINT
    if test:
        merged = expconf.test_mode_config(merged, rng)
    expconf.check(merged)
    # Before anything is packed or sent: the same lines the master would answer with.
    problems = trial_checks.trial_api_problems(merged, None)
    if problems:
        raise expconf.InvalidConfig(problems)
    return merged


# ---------------------------------------------------------------------------------------------
# submitting


def pack_context(context_dir: str, extra_files: dict[str, bytes] | None = None) -> bytes:
    """Pack `context_dir` (honouring .detignore) plus `extra_files` (relative path -> content)."""
    from determined.common import context as context_mod

    if not context_dir:
        raise ValueError("context_dir=: must name the directory to upload (e.g. context_dir='.')")
    if not extra_files:
        return context_mod.pack(context_dir)
    with tempfile.TemporaryDirectory(prefix="det-native-extra-") as tmp:
        tops = set()
        for relpath, content in extra_files.items():
            rel = pathlib.PurePosixPath(relpath)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise ValueError(
                    f"extra_files: {relpath!r} must be a relative path inside the context"
                )
            target = pathlib.Path(tmp, *rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            tops.add(rel.parts[0])
        return context_mod.pack(
            context_dir, includes=[os.path.join(tmp, top) for top in sorted(tops)]
        )


def submit_native(
    config: dict | str | None,
    context_dir: str,
    command: list[str],
    *,
    master_url: str | None = None,
    test: bool = False,
    extra_files: dict[str, bytes] | None = None,
    defaults: dict | None = None,
    notebook: dict | None = None,
    api: str | None = None,
) -> int:
    """Create an experiment that re-executes `command` from `context_dir`; returns its id.

    The master comes from `master_url`, else DET_MASTER, else the local master's master.json.
    `test=True` submits an archived test experiment (one batch, validation, checkpoint).
    `notebook` (`{path, cell_ids, script}`) records where an exported notebook script came from.
    """
    from determined.common.api import connect

    native_config = build_native_config(config, command, test=test, defaults=defaults, api=api)
    packed = pack_context(context_dir, extra_files)
    # The user waits for this: a missing or unreachable master is reported at once, with
    # where the address came from and how to start one.
    session = connect(master_url, interactive=True, given_as="master_url=")
    try:
        body = {
            "config": native_config,
            "context": base64.b64encode(packed).decode("ascii"),
            "activate": True,
            "archived": bool(test),
        }
        if notebook is not None:
            body["notebook"] = notebook
        experiment = session.post("/experiments", body)["experiment"]
    finally:
        session.close()
    kind = "test experiment" if test else "experiment"
    print(f"Created {kind} {experiment['id']}", flush=True)
    return int(experiment["id"])


def notebook_hook(name: str) -> Callable[..., Any]:
    """A hook that jupyter_determined registers for the Native API in a notebook
    (`determined.common.hooks`): the harness never imports it."""
    hook = hooks.get(name)
    if hook is None:
        raise ValueError(
            "command=: in a notebook, pass command=['my_notebook.ipynb'] relative to context_dir "
            "(install jupyter_determined to have the running notebook exported automatically)"
        )
    return hook


def submit_current_notebook(
    config: dict | str | None,
    context_dir: str,
    *,
    master_url: str | None = None,
    test: bool = False,
    defaults: dict | None = None,
    api: str | None = None,
) -> int:
    """Export the notebook this kernel runs (the `notebook_script` hook of jupyter_determined)
    and submit it as the native script."""
    script, notebook_path, cell_ids = notebook_hook(hooks.NOTEBOOK_SCRIPT)()
    stem = pathlib.Path(notebook_path).stem if notebook_path else "notebook"
    name = f"{stem}__det__.py"
    return submit_native(
        config,
        context_dir,
        [name],
        master_url=master_url,
        test=test,
        defaults=defaults,
        api=api,
        extra_files={name: script.encode("utf-8")},
        notebook={
            k: v
            for k, v in (
                ("path", notebook_path),
                ("cell_ids", list(cell_ids or [])),
                ("script", script),
            )
            if v is not None
        },
    )


def submit_notebook_and_stop(
    config: dict | str | None,
    context_dir: str,
    *,
    master_url: str | None,
    test: bool,
    defaults: dict | None,
    api: str | None = None,
) -> NoReturn:
    """A Native API call in a notebook: export and submit the notebook, show the experiment's
    widget, remember it as `last` (`%det ... last`), and stop the cell.

    In a notebook there is no script to re-execute: the notebook itself is the script, and the
    cells after the call (`fit()`, ...) run in the trials, so the cell is stopped with one line
    (`jupyter_determined.notebook_submitted`, the `notebook_submitted` hook) instead of killing
    the kernel.
    """
    notebook_submitted = notebook_hook(hooks.NOTEBOOK_SUBMITTED)  # missing: fail before submitting
    experiment_id = submit_current_notebook(
        config, context_dir, master_url=master_url, test=test, defaults=defaults, api=api
    )
    raise notebook_submitted(experiment_id)


def submit_and_exit(
    api: str,
    config: dict | str | None,
    context_dir: str,
    command: list[str] | None,
    *,
    master_url: str | None,
    test: bool,
    defaults: dict,
    kind: str | None = None,
) -> NoReturn:
    """The user-environment half of a Native API `init()` (`api` names it in errors, `kind` is
    its `internal.native.api`): submit the running script (or notebook) as an experiment that
    re-executes it, and stop here."""
    if not context_dir:
        raise ValueError(
            f"{api}(context_dir=...): name the directory to upload with the "
            "script (e.g. context_dir='.'), or pass local=True to train in this process"
        )
    if not command and is_jupyter():
        submit_notebook_and_stop(
            config, context_dir, master_url=master_url, test=test, defaults=defaults, api=kind
        )
    command = list(command) if command else default_command(context_dir)
    submit_native(
        config,
        context_dir,
        command,
        master_url=master_url,
        test=test,
        defaults=defaults,
        api=kind,
    )
    print("Exiting the program after submitting the experiment.", flush=True)
    sys.exit(0)
