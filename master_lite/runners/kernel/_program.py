"""What a kernel trial runs: an experiment's `environment.kernel` settings, the Python program its
entrypoint names, and the cell that runs that program inside the kernel with runpy semantics.

A kernel runs Python, not a shell: the entrypoints a kernel can run are `python3 script.py
ARGS`, `python3 -m module ARGS` (any `python`/`python3` word) and a legacy Trial class
(`model_def:MyTrial`, run by the harness). Anything else is refused at submit time.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import shlex
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from master_lite.runners.kernel._files import DEFAULT_FILES_LIMIT
from master_lite.runners.process._runner import _LEGACY_TRIAL_CLASS

DEFAULT_KERNEL_SPEC = "python3"
# How long a failed trial's kernel waits for a debugger (seconds), as Determined's default
# notebook idle timeout would suggest: long enough to attach, short enough not to pile up.
DEFAULT_KEEP_ALIVE = 600.0

# `environment.kernel.gateway: local`: a local kernel even when the master has a default gateway.
LOCAL_GATEWAY = "local"

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
class GatewayDefault:
    """The master's own Jupyter Gateway settings (`MasterLite.kernel_gateway_*` traits)."""

    # The gateway of every kernel experiment whose config names none (None: local kernels).
    url: str | None = None
    # The token for any gateway whose config gives none.
    token: str | None = None
    # The master URL (DET_MASTER) the gateway's kernels are given (None: the master's own).
    master_url: str | None = None
    # The most a gateway kernel is sent of the run's files (gzipped tar bytes).
    files_limit: int = DEFAULT_FILES_LIMIT


def effective_gateway(settings: KernelSettings, default: GatewayDefault | None) -> Any:
    """The gateway (a URL or `{url, token}`) the experiment's kernels start on; None: local."""
    if settings.gateway == LOCAL_GATEWAY:
        return None
    if settings.gateway is not None:
        return settings.gateway
    return default.url if default is not None and default.url else None


def fold_jupyter_gateway(config: dict) -> tuple[dict, list[str]]:
    """`environment.jupyter_gateway` (the issue's spelling: a URL or `{url, token}`) as
    `environment.kernel.gateway`, which it implies; (the config, problems). The config given
    is not changed."""
    environment = config.get("environment")
    if not isinstance(environment, dict) or environment.get("jupyter_gateway") is None:
        return config, []
    alias = environment["jupyter_gateway"]
    kernel = environment.get("kernel")
    kernel = dict(kernel) if isinstance(kernel, dict) else {}
    given = kernel.get("gateway")
    if given is not None and given != alias:
        return config, [
            f"environment.jupyter_gateway: {alias!r} differs from environment.kernel.gateway "
            f"{given!r} (they are two spellings of one setting: give one of them)"
        ]
    folded = copy.deepcopy(config)
    folded["environment"].pop("jupyter_gateway")
    folded["environment"]["kernel"] = {**kernel, "gateway": alias}
    return folded, []


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
    config: dict,
    spec_manager: KernelSpecManager | None = None,
    gateway_default: GatewayDefault | None = None,
) -> list[str]:
    """Why `config`'s trials cannot run in a kernel here (empty when they can, or when the
    experiment does not ask for kernels); a gateway is checked with the master's default
    gateway (and token) applied."""
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
    gateway = effective_gateway(settings, gateway_default)
    if gateway is not None:
        token = gateway_default.token if gateway_default is not None else None
        from_master = settings.gateway is None
        problems += _gateway_problems(gateway, settings.spec, token, from_master)
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


def _gateway_problems(gateway: Any, spec: str, token: str | None, from_master: bool) -> list[str]:
    # Imported here: the gateway's client (requests, websocket) is needed only by gateway users.
    from master_lite.runners.kernel._handles import (
        GatewayError,
        gateway_request,
        gateway_settings,
    )

    # A default gateway is the master's setting, not the config's: say so, and how to opt out.
    where = (
        "MasterLite.kernel_gateway_url (the master's default gateway; `gateway: local` in "
        "environment.kernel runs a local kernel instead)"
        if from_master
        else "environment.kernel.gateway"
    )
    try:
        url, token = gateway_settings(gateway, token)
        specs = (gateway_request(url, token, "GET", "/api/kernelspecs") or {}).get(
            "kernelspecs"
        ) or {}
    except (ValueError, GatewayError) as exc:
        return [str(exc) if str(exc).startswith("environment.") else f"{where}: {exc}"]
    if spec not in specs:
        known = ", ".join(sorted(specs)) or "none"
        return [
            f"environment.kernel.spec: the Jupyter Gateway at {url} has no kernelspec named "
            f"{spec!r} (it has: {known})"
        ]
    return []


# Runs in the kernel, in a private namespace: the program itself runs in the kernel's user
# namespace, so its globals outlive it (an attached console and `%debug` see them, also after
# a failure, which `runpy.run_path` would not return).
_RUNNER_SOURCE = """
import importlib.util, os, sys
from IPython import get_ipython

def _notebook_cells(source, path):
    # An exported notebook runs cell by cell, each compiled under its cell's name and lines:
    # IPython's traceback and %debug then show the notebook's cells, not the script's lines.
    try:
        from determined.common.notebook_errors import compile_cells
    except ImportError:
        return None
    return compile_cells(source, path)

def run(kind, target, argv):
    __tracebackhide__ = True  # tracebacks and %debug show the program's frames, not this one
    ns = get_ipython().user_ns
    if kind == "path":
        path = os.path.abspath(target)
        with open(path, "rb") as f:
            source = f.read()
        codes = _notebook_cells(source, path) or [compile(source, path, "exec")]
        sys.path.insert(0, os.path.dirname(path))
        ns.update(__name__="__main__", __file__=path)
        sys.argv = [path, *argv]
    else:
        spec = importlib.util.find_spec(target)
        if spec is None or spec.loader is None:
            raise ModuleNotFoundError(f"No module named {target!r}")
        codes = [spec.loader.get_code(target)]
        sys.path.insert(0, os.getcwd())
        ns.update(__name__="__main__", __file__=spec.origin, __spec__=spec)
        sys.argv = [spec.origin or target, *argv]
    setattr(sys, EXIT_ATTRIBUTE, None)
    hook = sys.excepthook
    try:
        for code in codes:
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


def trial_traceback(entries: list[str]) -> list[str]:
    """The kernel's traceback of a failed program (an `error` message's entries, one a frame)
    without the frames of the runner: its program cell (`Cell In[1]` of the trial's kernel, not
    of the user's notebook, whose cells the program's frames name) and the note on its hidden
    frame. The trial's log then shows the program's own frames only."""
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    kept = [
        entry
        for entry in entries
        if f"{_RUN_ATTRIBUTE}(" not in (plain := ansi.sub("", entry))
        and not plain.strip().startswith("[... skipping hidden")
    ]
    return kept if kept else list(entries)


def exit_expression() -> str:
    """A user expression giving the exit status the program left (None: it raised)."""
    return f"getattr(__import__('sys'), {EXIT_ATTRIBUTE!r}, None)"


__all__ = [
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_KERNEL_SPEC",
    "LOCAL_GATEWAY",
    "GatewayDefault",
    "KernelProgram",
    "KernelSettings",
    "effective_gateway",
    "exit_expression",
    "fold_jupyter_gateway",
    "kernel_config_problems",
    "kernel_program",
    "kernel_settings",
    "program_cell",
    "setup_cell",
    "trial_traceback",
]
