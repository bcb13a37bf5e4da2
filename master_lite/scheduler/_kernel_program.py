"""What a kernel trial runs: an experiment's `environment.kernel` settings, the Python program its
entrypoint names, and the cell that runs that program inside the kernel with runpy semantics.

A kernel runs Python, not a shell: the entrypoints a kernel can run are `python3 script.py
ARGS`, `python3 -m module ARGS` (any `python`/`python3` word) and a legacy Trial class
(`model_def:MyTrial`, run by the harness). Anything else is refused at submit time.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from master_lite.scheduler._local import _LEGACY_TRIAL_CLASS

DEFAULT_KERNEL_SPEC = "python3"
# How long a failed trial's kernel waits for a debugger (seconds), as Determined's default
# notebook idle timeout would suggest: long enough to attach, short enough not to pile up.
DEFAULT_KEEP_ALIVE = 600.0

# The attribute of `sys` in the kernel where the program's exit status is left (a cell that
# raises SystemExit would only print it).
EXIT_ATTRIBUTE = "_determined_trial_exit"


@dataclasses.dataclass(frozen=True)
class KernelSettings:
    """An experiment's `environment.kernel`, with the defaults filled in."""

    spec: str = DEFAULT_KERNEL_SPEC
    keep_alive: float = DEFAULT_KEEP_ALIVE
    gateway: Any = None


@dataclasses.dataclass(frozen=True)
class KernelProgram:
    """The Python program of a trial: `kind` "path" (a script file) or "module" (`-m`)."""

    kind: str
    target: str
    argv: list[str]


def kernel_settings(config: dict | None) -> KernelSettings | None:
    """The experiment's kernel settings; None when its trials do not run in kernels (any
    `environment.kernel` mapping, even `{}`, means they do)."""
    kernel = ((config or {}).get("environment") or {}).get("kernel")
    if not isinstance(kernel, dict):
        return None
    keep_alive = kernel.get("keep_alive")
    return KernelSettings(
        spec=kernel.get("spec") or DEFAULT_KERNEL_SPEC,
        keep_alive=DEFAULT_KEEP_ALIVE if keep_alive is None else float(keep_alive),
        gateway=kernel.get("gateway"),
    )


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return name in ("python", "python3") or (
        name.startswith("python3.") and name[len("python3.") :].isdigit()
    )


def kernel_program(entrypoint: str | list[str]) -> KernelProgram:
    """The program a kernel runs for `entrypoint`; ValueError naming what a kernel cannot run."""
    if isinstance(entrypoint, str) and _LEGACY_TRIAL_CLASS.match(entrypoint.strip()):
        return KernelProgram("module", "determined.exec.harness", [entrypoint.strip()])
    words = list(entrypoint) if isinstance(entrypoint, list) else shlex.split(entrypoint)
    if len(words) >= 2 and _is_python(words[0]):
        if words[1] == "-m" and len(words) >= 3:
            return KernelProgram("module", words[2], words[3:])
        if not words[1].startswith("-"):
            return KernelProgram("path", words[1], words[2:])
    raise ValueError(
        f"entrypoint: {entrypoint!r} cannot run in a kernel, which runs Python, not a shell "
        "(use `python3 script.py ARGS`, `python3 -m module ARGS` or a Trial class "
        "`model_def:MyTrial`; or remove environment.kernel to run it as a process)"
    )


def kernel_config_problems(
    config: dict, spec_manager: KernelSpecManager | None = None
) -> list[str]:
    """Why `config`'s trials cannot run in a kernel here (empty when they can, or when the
    experiment does not ask for kernels)."""
    settings = kernel_settings(config)
    if settings is None:
        return []
    problems = []
    if (config.get("environment") or {}).get("image"):
        problems.append(
            "environment: a trial runs either in a kernel (environment.kernel) or in a container "
            "(environment.image), not both (remove one; a container kernelspec runs a kernel "
            "in a container)"
        )
    slots = (config.get("resources") or {}).get("slots_per_trial") or 1
    if int(slots) > 1:
        problems.append(
            f"resources.slots_per_trial: {slots} slots cannot run in one kernel (kernel trials "
            "are single-process: use 1 slot, or remove environment.kernel to run the "
            "distributed launcher as processes)"
        )
    try:
        kernel_program(config.get("entrypoint") or "")
    except ValueError as exc:
        problems.append(str(exc))
    if settings.gateway is not None:
        problems += _gateway_problems(settings)
    else:
        manager = spec_manager or KernelSpecManager()
        try:
            manager.get_kernel_spec(settings.spec)
        except NoSuchKernel:
            known = ", ".join(sorted(manager.find_kernel_specs())) or "none"
            problems.append(
                f"environment.kernel.spec: no kernelspec named {settings.spec!r} on this machine "
                f"(installed: {known}; `jupyter kernelspec list` shows them)"
            )
    return problems


def _gateway_problems(settings: KernelSettings) -> list[str]:
    # Imported here: the gateway's client (requests, websocket) is needed only by gateway users.
    from master_lite.scheduler._kernel_handles import (
        GatewayError,
        gateway_request,
        gateway_settings,
    )

    try:
        url, token = gateway_settings(settings.gateway)
        specs = (gateway_request(url, token, "GET", "/api/kernelspecs") or {}).get(
            "kernelspecs"
        ) or {}
    except (ValueError, GatewayError) as exc:
        return [
            str(exc)
            if str(exc).startswith("environment.")
            else f"environment.kernel.gateway: {exc}"
        ]
    if settings.spec not in specs:
        known = ", ".join(sorted(specs)) or "none"
        return [
            f"environment.kernel.spec: the Jupyter Gateway at {url} has no kernelspec named "
            f"{settings.spec!r} (it has: {known})"
        ]
    return []


# Runs in the kernel, in a private namespace: the program itself runs in the kernel's user
# namespace, so its globals outlive it (an attached console and `%debug` see them, also after
# a failure, which `runpy.run_path` would not return).
_RUNNER_SOURCE = """
import importlib.util, os, sys
from IPython import get_ipython

def run(kind, target, argv):
    __tracebackhide__ = True  # tracebacks and %debug show the program's frames, not this one
    ns = get_ipython().user_ns
    if kind == "path":
        path = os.path.abspath(target)
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
        sys.path.insert(0, os.path.dirname(path))
        ns.update(__name__="__main__", __file__=path)
        sys.argv = [path, *argv]
    else:
        spec = importlib.util.find_spec(target)
        if spec is None or spec.loader is None:
            raise ModuleNotFoundError(f"No module named {target!r}")
        code = spec.loader.get_code(target)
        sys.path.insert(0, os.getcwd())
        ns.update(__name__="__main__", __file__=spec.origin, __spec__=spec)
        sys.argv = [spec.origin or target, *argv]
    setattr(sys, EXIT_ATTRIBUTE, None)
    hook = sys.excepthook
    try:
        exec(code, ns)
        status = 0
    except SystemExit as exc:
        status = exc.code
        if status is None:
            status = 0
        elif not isinstance(status, int):
            print(status, file=sys.stderr)
            status = 1
    except BaseException as exc:
        # A hook the program installed (an exported notebook's maps its traceback to the
        # notebook's cells) hears of the failure as in a process; then IPython shows it and
        # keeps it for %debug.
        if sys.excepthook is not hook:
            try:
                sys.excepthook(type(exc), exc, exc.__traceback__)
            except Exception:
                pass
        raise
    setattr(sys, EXIT_ATTRIBUTE, status)

sys.RUN_ATTRIBUTE = run
"""
_RUN_ATTRIBUTE = "_determined_run_trial"


def setup_cell(env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    """A cell (to run silently) that defines the runner in the kernel, out of the user's
    namespace, so that the program's cell and its tracebacks stay one short line; with `env`
    and `cwd` (a kernel that did not start with them: a gateway's) it sets those first."""
    source = _RUNNER_SOURCE.replace("EXIT_ATTRIBUTE", repr(EXIT_ATTRIBUTE)).replace(
        "RUN_ATTRIBUTE", _RUN_ATTRIBUTE
    )
    if env:
        source = f"import os\nos.environ.update({env!r})\n" + source
    if cwd:
        source = f"import os\nos.makedirs({cwd!r}, exist_ok=True)\nos.chdir({cwd!r})\n" + source
    return (
        f"exec(compile({source!r}, '<determined kernel runner>', 'exec'), "
        "{'__name__': '__determined_kernel_runner__'})"
    )


def program_cell(program: KernelProgram) -> str:
    """The cell that runs `program` in the kernel, after `setup_cell` (the program's exit
    status is then in `sys.<EXIT_ATTRIBUTE>`, see `exit_expression`)."""
    args = (program.kind, program.target, list(program.argv))
    return f"__import__('sys').{_RUN_ATTRIBUTE}{args!r}"


def exit_expression() -> str:
    """A user expression giving the exit status the program left (None: it raised)."""
    return f"getattr(__import__('sys'), {EXIT_ATTRIBUTE!r}, None)"


__all__ = [
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_KERNEL_SPEC",
    "KernelProgram",
    "KernelSettings",
    "exit_expression",
    "kernel_config_problems",
    "kernel_program",
    "kernel_settings",
    "program_cell",
    "setup_cell",
]
