"""IPython magics: `%%det_submit`, `%det_submit`, `%det` (after `%load_ext jupyter_determined`).

`%%det_submit [CONFIG] [--context DIR] [--name N] [--local] [--test] [--wait]`: the cell body is
the training code; the notebook's code cells above it and the body are exported as one script
(`jupyter_determined.kernel._export`), packed with the context directory, and submitted. CONFIG is
a YAML/JSON file or the name of a variable holding a config dict or YAML text; it needs no
`entrypoint`. The live widget appears under the cell and the magic returns at once (unless
`--wait`, or `--test`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from jupyter_determined.kernel._current_notebook import current_notebook_export, frontend_notebook
from jupyter_determined.kernel._export import NotebookExportError
from jupyter_determined.kernel._submission import (
    DEFAULT_CONFIG,
    SCRIPT_NAME,
    build_config,
    master_problem,
    master_session,
    pack_with_script,
    resolve_config,
    submit_exported,
)

# How long `--wait` keeps waiting for a master that stopped answering (a server restart).
WAIT_MASTER_GONE_SECONDS = 120.0

_last_experiment_id: int | None = None


def last_experiment_id() -> int | None:
    """The experiment most recently submitted from this kernel (`%det describe last`)."""
    return _last_experiment_id


def remember_experiment(experiment_id: int) -> None:
    global _last_experiment_id
    _last_experiment_id = int(experiment_id)


class NotebookSubmitted(Exception):
    """Stops the running cell after a submission from a notebook, with one line and no traceback.

    The Native API raises it when `det.experimental.keras.init(...)` runs in a notebook: the
    notebook was exported and submitted, so the cells after it must not train in the kernel.
    IPython calls `_render_traceback_` instead of printing a traceback.
    """

    def __init__(self, experiment_id: int, message: str | None = None) -> None:
        self.experiment_id = experiment_id
        remember_experiment(experiment_id)
        self.message = message or (
            f"Submitted experiment {experiment_id}: the rest of this "
            "notebook runs in the experiment's trials, not here."
        )
        super().__init__(self.message)

    def _render_traceback_(self) -> list[str]:
        return [self.message]


def notebook_submitted(experiment_id: int, *, show_widget: bool = True) -> NotebookSubmitted:
    """Display the experiment's live widget and return the exception that stops the cell."""
    if show_widget:
        from jupyter_determined.kernel._widget import show_experiment

        show_experiment(experiment_id)
    return NotebookSubmitted(experiment_id)


# ---------------------------------------------------------------------------------------------
# The magics


def _submit_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, add_help=False, exit_on_error=False)
    parser.add_argument("config", nargs="?", default=None)
    parser.add_argument("--context", default=".")
    parser.add_argument("--name", default=None)
    parser.add_argument("--local", action="store_true")
    parser.add_argument("--test", action="store_true")
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--no-widget", dest="widget", action="store_false")
    return parser


def _parse(parser: argparse.ArgumentParser, line: str) -> argparse.Namespace:
    try:
        return parser.parse_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as exc:
        raise UsageError(f"{parser.prog}: {exc}") from None
    except SystemExit:  # argparse reports some errors by exiting
        raise UsageError(f"{parser.prog}: invalid arguments {line!r}") from None


@magics_class
class DeterminedMagics(Magics):
    """`%%det_submit`, `%det_submit`, `%det`."""

    @cell_magic
    def det_submit(self, line: str, cell: str | None = None) -> Any:
        """Submit the code cells above (and this cell's body) as an experiment."""
        return self._submit(line, cell)

    # IPython annotates the decorator its named form returns as taking `Never`.
    @line_magic("det_submit")  # type: ignore[arg-type]
    def det_submit_line(self, line: str) -> Any:
        """`%det_submit [CONFIG] [options]`: submit the code cells above this one."""
        return self._submit(line, None)

    def _submit(self, line: str, cell: str | None) -> Any:
        prog = "%%det_submit" if cell is not None else "%det_submit"
        shell = self.shell
        if shell is None:  # Magics made by hand, outside IPython
            raise UsageError(f"{prog} runs inside IPython (a Jupyter kernel)")
        args = _parse(_submit_parser(prog), line)
        if args.local:
            if cell is None:
                raise UsageError(
                    "%det_submit --local: nothing to run; use %%det_submit --local "
                    "with the training code in the cell"
                )
            from jupyter_determined.kernel._local_run import run_locally

            # Tracked as an unmanaged run: det.core.init() in the cell reports to it.
            config = resolve_config(args.config, shell.user_ns)
            return run_locally(shell, cell, config, name=args.name, show_widget=args.widget)
        config = resolve_config(args.config, shell.user_ns)
        try:
            exported = current_notebook_export(shell, which="above_current", training_code=cell)
        except NotebookExportError as exc:
            raise UsageError(str(exc)) from None
        for message in exported.warnings:
            print(f"warning: {message}", file=sys.stderr)
        from determined.common import expconf
        from determined.common.api import APIError
        from determined.common.context import ContextError

        try:
            config = build_config(
                config, name=args.name, notebook_path=exported.notebook_path, test=args.test
            )
        except expconf.InvalidConfig as exc:
            raise UsageError("invalid experiment config:\n  " + "\n  ".join(exc.errors)) from None
        try:
            experiment = submit_exported(
                exported, config, context_dir=args.context, archived=args.test
            )
        except Exception as exc:
            # A context that cannot be packed (too large: its largest files and the fix) is one
            # message, like an unreachable master: a traceback into tarfile code helps no one.
            problem = str(exc) if isinstance(exc, ContextError) else master_problem(exc)
            if problem is not None:
                raise UsageError(f"{prog}: the experiment was not submitted: {problem}") from None
            if isinstance(exc, APIError):
                raise UsageError(f"the master refused the experiment: {exc}") from None
            raise
        remember_experiment(experiment["id"])
        kind = "test experiment" if args.test else "experiment"
        print(f"Created {kind} {experiment['id']}", flush=True)
        widget = None
        if args.widget:
            from jupyter_determined.kernel._widget import show_experiment

            widget = show_experiment(experiment["id"])
        if args.wait or args.test:
            return self._wait(experiment["id"], widget)
        return None

    def _wait(self, experiment_id: int, widget: Any) -> None:
        """Block the cell until the experiment ends (Ctrl-C / interrupt stops waiting only).

        The widget's buttons act from the browser through the master's API, so they keep
        working while this waits; the loop only reads the state."""
        import time

        from determined.common.api import MasterUnreachable
        from determined.common.states import TERMINAL_EXPERIMENT_STATES

        session = master_session()
        terminal = {str(state) for state in TERMINAL_EXPERIMENT_STATES}
        lost_since: float | None = None
        try:
            while True:
                try:
                    experiment = session.get(f"/experiments/{experiment_id}")["experiment"]
                    lost_since = None
                except MasterUnreachable:
                    # A server restart is not the end of the experiment: keep waiting a while.
                    lost_since = lost_since or time.monotonic()
                    if time.monotonic() - lost_since > WAIT_MASTER_GONE_SECONDS:
                        raise
                    time.sleep(2.0)
                    continue
                if experiment["state"] in terminal:
                    break
                time.sleep(0.5)
        except KeyboardInterrupt:
            print(
                f"Stopped waiting; experiment {experiment_id} goes on (kill it with the "
                f"widget's Kill button or %det kill {experiment_id}).",
                flush=True,
            )
            return
        finally:
            session.close()
        if widget is not None:
            widget.wait(timeout=30)
        best = experiment.get("best_validation")
        print(
            f"Experiment {experiment_id} {experiment['state']}"
            + (f", best validation {best:.6g}" if isinstance(best, (int, float)) else ""),
            flush=True,
        )

    @line_magic
    def det(self, line: str) -> Any:
        """`%det list | describe ID | logs TRIAL_ID [--tail N] | pause|activate|kill ID | widget ID
        | use UUID | use best ID | attach TRIAL_ID [CODE | --console] | detach`.

        ID may be `last`: the experiment submitted last from this kernel. `use` makes the cell
        that downloads and loads a checkpoint the next cell."""
        words = shlex.split(line)
        if not words:
            raise UsageError(DeterminedMagics.det.__doc__ or "")
        command, rest = words[0], words[1:]
        try:
            session = master_session()
        except Exception as exc:
            problem = master_problem(exc)
            if problem is None:
                raise
            raise UsageError(f"%det {command}: {problem}") from None
        try:
            if command == "list":
                return self._list(session)
            if command == "use":
                return self._use(session, rest)
            if command == "attach":
                return _attach(session, line.split(None, 2)[1:])
            if command == "detach":
                from jupyter_determined.kernel._attach_console import detach_console

                print("Detached." if detach_console() else "Not attached to a trial.")
                return None
            if command in ("describe", "pause", "activate", "kill", "cancel", "widget", "logs"):
                if rest and rest[0] == "last" and _last_experiment_id is not None:
                    rest[0] = str(_last_experiment_id)
                if not rest or not rest[0].isdigit():
                    raise UsageError(
                        f"%det {command} needs an id (or 'last' after a "
                        f"submission), e.g. %det {command} 1"
                    )
                ident = int(rest[0])
                if command == "describe":
                    return self._describe(session, ident)
                if command == "logs":
                    tail = int(rest[rest.index("--tail") + 1]) if "--tail" in rest else None
                    for entry in session.get(f"/trials/{ident}/logs", params={"tail": tail}).get(
                        "logs", []
                    ):
                        print(entry["line"].rstrip("\n"))
                    return None
                if command == "widget":
                    from jupyter_determined.kernel._widget import show_experiment

                    show_experiment(ident)
                    return None
                experiment = session.post(f"/experiments/{ident}/{command}")["experiment"]
                print(f"Experiment {ident}: {experiment['state']}")
                return None
            raise UsageError(
                f"%det: unknown command {command!r}; use list, describe, logs, "
                "pause, activate, kill, widget, use, attach, detach"
            )
        except UsageError:
            raise
        except Exception as exc:
            from determined.common.api import APIError

            if isinstance(exc, APIError):  # an unreachable master included (status 0)
                raise UsageError(f"%det {command}: {exc}") from None
            raise
        finally:
            session.close()

    def _use(self, session: Any, rest: list[str]) -> None:
        from jupyter_determined.kernel._use import best_checkpoint_uuid, insert_checkpoint_cell

        if rest[:1] == ["best"] and len(rest) == 2:
            ident = _last_experiment_id if rest[1] == "last" else rest[1]
            if ident is None or not str(ident).isdigit():
                raise UsageError("%det use best needs an experiment id, e.g. %det use best 3")
            try:
                uuid = best_checkpoint_uuid(session, int(ident))
            except ValueError as exc:
                raise UsageError(f"%det use: {exc}") from None
        elif len(rest) == 1 and rest[0] != "best":
            uuid = rest[0]
        else:
            raise UsageError("%det use CHECKPOINT_UUID, or %det use best EXPERIMENT_ID")
        snippet = insert_checkpoint_cell(session, uuid, self.shell)
        print(f"The next cell downloads checkpoint {uuid} and loads it ({snippet['kind']}).")

    def _list(self, session: Any) -> None:
        experiments = session.get("/experiments").get("experiments", [])
        print(f"{'ID':>4}  {'STATE':<20} {'PROGRESS':>8}  NAME")
        for experiment in experiments:
            print(
                f"{experiment['id']:>4}  {experiment['state']:<20} "
                f"{experiment.get('progress') or 0:>8.0%}  {experiment.get('name') or ''}"
            )

    def _describe(self, session: Any, experiment_id: int) -> None:
        answer = session.get(f"/experiments/{experiment_id}")
        experiment = answer["experiment"]
        print(
            f"Experiment {experiment['id']} {experiment.get('name') or ''}: "
            f"{experiment['state']} ({(experiment.get('progress') or 0):.0%}), "
            f"best validation {experiment.get('best_validation')}"
        )
        for trial in answer.get("trials", []):
            print(
                f"  trial {trial['id']} {trial['state']} steps={trial['steps_completed']} "
                f"hparams={trial.get('hparams')}"
            )


def register_magics(ipython: Any) -> None:
    ipython.register_magics(DeterminedMagics)
    frontend_notebook.register(ipython)


__all__ = [
    "DEFAULT_CONFIG",
    "DeterminedMagics",
    "NotebookSubmitted",
    "SCRIPT_NAME",
    "build_config",
    "last_experiment_id",
    "notebook_submitted",
    "pack_with_script",
    "register_magics",
    "resolve_config",
    "submit_exported",
]


def _attach(session: Any, words: list[str]) -> Any:
    """`%det attach TRIAL_ID [CODE]`: run CODE in the kernel trial's kernel and print its output
    (the debugger's prompts are answered here); without CODE, a `TrialKernel` to `.run()` code
    in (see `det trial attach`); with `--console`, every later cell runs there (until
    `%det detach`; what JupyterLab's Attach on a running trial does)."""
    from determined.cli import attach_trial

    if not words or not words[0].isdigit():
        raise UsageError("%det attach needs a trial id, e.g. %det attach 3 best")
    if len(words) == 2 and words[1].strip() == "--console":
        from jupyter_determined.kernel._attach_console import attach_console

        attach_console(session, int(words[0]))
        return None
    kernel = attach_trial(session, int(words[0]))
    if len(words) == 1:
        return kernel
    try:
        kernel.run(words[1], answer=lambda prompt, _password: input(prompt))
    finally:
        kernel.close()
    return None
