"""A run's exit status: the rule every runner reports it by, and the words the master shows.

The runners report a run killed by signal N as exit code 128 + N (`exit_code_of`: what a shell
reports for a child it ran, so `sh -c "python3 train.py"` reads the same as a bare interpreter). The master
records why it signalled a run (its kill and preemption paths); a SIGKILL it did not send is
most often the kernel's OOM killer.
"""

from __future__ import annotations

import signal

# Standard library only: the Ray actor, shipped to Ray nodes by value, reports by this rule.

OOM_HINT = "possibly out of memory (the kernel's OOM killer sends SIGKILL)"
UNKNOWN = "reason unknown"


def exit_code_of(returncode: int) -> int:
    """The exit code a runner reports for a process's return code: a Popen return code -N
    (killed by signal N) becomes 128 + N, as a shell reports it; others stay."""
    return returncode if returncode >= 0 else 128 - returncode


def killed_exit_code(sig: int) -> int:
    """The exit code of a run ended by signal `sig` before it had a return code of its own."""
    return 128 + int(sig)


def signal_of(exit_code: int | None) -> signal.Signals | None:
    """The signal behind an exit code: -N (a Popen return code) or 128 + N (a shell's)."""
    if exit_code is None:
        return None
    number = -exit_code if exit_code < 0 else exit_code - 128 if exit_code > 128 else None
    if number is None:
        return None
    try:
        return signal.Signals(number)
    except ValueError:
        return None


def exit_summary(exit_code: int | None, *, signalled_because: str | None = None) -> str | None:
    """`exited with code 3`, `killed by signal SIGKILL (9): killed by the user (experiment
    kill)`, ...; None for a clean exit (0) or no exit code.

    `signalled_because`: why the master signalled the run, if it did (see `Master`'s kill and
    preemption paths); without it a SIGKILL is reported as possibly out of memory.
    """
    if exit_code is None or exit_code == 0:
        return None
    sig = signal_of(exit_code)
    if sig is None:
        return f"exited with code {exit_code}"
    if signalled_because:
        why = signalled_because
    elif sig == signal.SIGKILL:
        why = OOM_HINT
    else:
        why = UNKNOWN
    return f"killed by signal {sig.name} ({int(sig)}): {why}"


def determined_exit_line(
    exit_code: int | None, *, container: bool, killed: bool = False
) -> str | None:
    """Determined's words for a run that ended with a non-zero exit code, as its master writes
    them to the trial's log (Determined's tests and users' scripts grep them): `crashed:
    resources failed with non-zero exit code: container failed with non-zero exit code: 1 (exit
    code 1)` for a container run; a process or kernel run says `process` where Determined's agent
    says `container`. `killed`: the master ended the run (kill, preemption), which Determined
    logs as `killed: ...`. None for a clean exit or no exit code."""
    if exit_code is None or exit_code == 0:
        return None
    code = exit_code_of(exit_code)
    place = "container" if container else "process"
    return (
        f"{'killed' if killed else 'crashed'}: resources failed with non-zero exit code: "
        f"{place} failed with non-zero exit code: {code} (exit code {code})"
    )


__all__ = [
    "OOM_HINT",
    "determined_exit_line",
    "UNKNOWN",
    "exit_code_of",
    "exit_summary",
    "killed_exit_code",
    "signal_of",
]
