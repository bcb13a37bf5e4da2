"""`%det attach TRIAL_ID --console`: every later cell of this kernel runs in a trial's kernel.

JupyterLab's own console cannot join a *running* trial's kernel usefully: the console's first
request (kernel_info) goes to the kernel's main shell, which is busy running the trial until it
ends. So "Attach" on a running trial opens a console on a small kernel of its own and runs this
magic there: each cell typed afterwards is sent, through a `TrialKernel`, to a subshell of the
trial's kernel (ipykernel 7), which answers at once with the script's live globals, and its
output is printed in the console. `%det detach` ends it; so does the trial's kernel going away.
"""

from __future__ import annotations

from typing import Any

_ATTACHED: dict[str, Any] = {}  # "kernel": the TrialKernel, "transform": the input transformer


def attach_console(session: Any, trial_id: int) -> None:
    """Send every later cell of this IPython shell to trial `trial_id`'s kernel.

    Raises:
        determined.cli.CliError (from `attach_trial`): the trial has no kernel to attach to.
    """
    from IPython import get_ipython
    from IPython.core.error import UsageError

    from determined.cli import attach_trial

    shell = get_ipython()
    if shell is None:
        raise UsageError("%det attach --console works in an IPython kernel only")
    detach_console()
    kernel = attach_trial(session, trial_id)

    def forward(lines: list[str]) -> list[str]:
        code = "".join(lines)
        if not code.strip() or code.lstrip().startswith(("%det detach", "%det attach")):
            return lines  # this kernel's own business
        if not _complete(code):
            return lines  # so the console asks for the rest of the block before running it
        return [
            f"__import__('jupyter_determined.kernel._attach_console', fromlist=['_']).run_attached({code!r})\n"
        ]

    shell.input_transformers_cleanup.append(forward)
    _ATTACHED.update(kernel=kernel, transform=forward)
    how = "post-mortem" if kernel.info.get("post_mortem") else "running; cells run in a subshell"
    print(
        f"Attached to trial {trial_id}'s kernel ({how}). Each cell now runs there, with the "
        "script's globals; it is not read-only. `%det detach` ends this."
    )


def _complete(code: str) -> bool:
    """False for a block still being typed (`for i in x:`); magics and errors count as complete:
    the trial's kernel runs them and reports what is wrong."""
    import codeop

    try:
        return codeop.compile_command(code, "<attached>", "exec") is not None
    except (SyntaxError, ValueError, OverflowError):
        return True


def run_attached(code: str) -> None:
    """Run `code` in the attached trial's kernel, printing its output (a cell, forwarded)."""
    from determined.cli import CliError

    kernel = _ATTACHED.get("kernel")
    if kernel is None:
        print("Not attached to a trial (%det attach TRIAL_ID --console).")
        return
    try:
        kernel.run(code, answer=lambda prompt, _password: input(prompt))
    except CliError as exc:
        detach_console()
        print(f"{exc}\nDetached: cells run in this console's own kernel again.")


def detach_console() -> bool:
    """Stop forwarding cells; True when a trial was attached."""
    from IPython import get_ipython

    kernel, forward = _ATTACHED.pop("kernel", None), _ATTACHED.pop("transform", None)
    shell = get_ipython()
    if shell is not None and forward in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(forward)
    if kernel is not None:
        kernel.close()
    return kernel is not None
