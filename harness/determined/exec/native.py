"""Run a Native API script in a trial: ``python3 -m determined.exec.native``.

The command comes from the experiment config's `internal.native.command` (set when the script
submitted itself). The script is re-executed from the top with `runpy`; its Native entry point
(`det.experimental.keras.init()` + `fit()`, or `det.experimental.create()`) registers what to
train and stops the script with `StopLoadingImplementation`; then this runner trains it.
A `.ipynb` command is first converted to a script (code cells, without `!`/`%` lines).
"""

from __future__ import annotations

import logging
import os
import pathlib
import runpy
import sys

import determined as det
from determined.experimental._native import (
    RunpyGlobals,
    StopLoadingImplementation,
    notebook_to_script,
)

logger = logging.getLogger("determined.exec.native")


def script_for(command0: str) -> str:
    """The Python file to run for `command[0]`; a notebook becomes `<name>__det__.py` beside it."""
    path = pathlib.Path(command0)
    if path.suffix != ".ipynb":
        return command0
    script = path.with_name(f"{path.stem}__det__.py")
    script.write_text(notebook_to_script(path), encoding="utf-8")
    return str(script)


def native_command(config: dict) -> list[str]:
    command = ((config.get("internal") or {}).get("native") or {}).get("command")
    if not command or not isinstance(command, list):
        raise ValueError(
            "determined.exec.native: the experiment config has no internal.native.command; this runner is "
            "the entrypoint of experiments submitted by det.experimental.keras.init()/create()"
        )
    return [str(part) for part in command]


def run(command: list[str]) -> int:
    script = script_for(command[0])
    if not os.path.exists(script):
        print(
            f"determined.exec.native: the script {script!r} is not in the context directory",
            file=sys.stderr,
        )
        return 1
    script_dir = os.path.dirname(os.path.abspath(script))
    saved_argv, saved_path = sys.argv, list(sys.path)
    with RunpyGlobals() as runpy_globals:
        sys.argv = [command[0], *command[1:]]
        sys.path.insert(0, script_dir)
        try:
            runpy.run_path(script, run_name="__main__")
        except StopLoadingImplementation:
            pass
        finally:
            sys.argv = saved_argv
        if runpy_globals.train_fn is None:
            print(
                f"determined.exec.native: {command[0]} finished without starting training: call "
                "det.experimental.keras.init() and model.fit(...), or det.experimental.create(TrialClass, ...)",
                file=sys.stderr,
            )
            return 1
        logger.info("training %s", runpy_globals.description)
        runpy_globals.train_fn()
    sys.path[:] = saved_path
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    if info is None or info.task_type != "TRIAL":
        print(
            "determined.exec.native: runs only inside a trial started by the master",
            file=sys.stderr,
        )
        return 2
    command = list(argv) if argv else native_command(info.trial._config)
    return run(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
