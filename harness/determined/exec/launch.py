"""The trial's entry point: run the experiment's ``entrypoint`` and stand in for it.

Usage: ``python3 -m determined.exec.launch [ENTRYPOINT...]`` (default: ``entrypoint`` from the
expanded experiment config in ``DET_EXPERIMENT_CONFIG``).

* a list runs as is;
* a legacy ``module:TrialClass`` string runs the trial harness (under torchrun when the trial has
  several slots);
* any other string runs through ``sh -c``.

SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGWINCH are forwarded to the entrypoint, and our
exit code is its exit code (128 + N when signal N killed it).
"""

import json
import os
import re
import signal
import subprocess
import sys

from determined.launch import _lifetime

FORWARDED_SIGNALS = [
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGBREAK")
    if hasattr(signal, name)
]

# "model_def:MyTrial" or "pkg.model_def:MyTrial": a Trial class, not a shell command.
_LEGACY_TRIAL_CLASS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def entrypoint_command(
    entrypoint: str | list[str], *, num_slots: int = 1, python: str = sys.executable
) -> list[str]:
    if isinstance(entrypoint, list):
        if not entrypoint:
            raise ValueError("entrypoint: an empty list cannot be run")
        return [str(part) for part in entrypoint]
    if not isinstance(entrypoint, str) or not entrypoint.strip():
        raise ValueError(f"entrypoint: expected a command string or list, got {entrypoint!r}")
    if _LEGACY_TRIAL_CLASS.match(entrypoint.strip()):
        if num_slots > 1:
            return [python, "-m", "determined.launch.torch_distributed", "--trial", entrypoint]
        return [python, "-m", "determined.exec.harness", entrypoint]
    return ["sh", "-c", entrypoint]


def _entrypoint_from_env() -> str | list[str]:
    raw = os.environ.get("DET_EXPERIMENT_CONFIG")
    if not raw:
        raise ValueError(
            "no entrypoint given and DET_EXPERIMENT_CONFIG is not set: run "
            "`python3 -m determined.exec.launch ENTRYPOINT...` or run inside a trial"
        )
    entrypoint = json.loads(raw).get("entrypoint")
    if entrypoint is None:
        raise ValueError("the experiment config has no entrypoint")
    return entrypoint


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if args:
            # One argument is a command string (like the config's); several are an argv list.
            entrypoint: str | list[str] = args[0] if len(args) == 1 else args
        else:
            entrypoint = _entrypoint_from_env()
        num_slots = len(json.loads(os.environ.get("DET_SLOT_IDS") or "[]"))
        cmd = entrypoint_command(entrypoint, num_slots=num_slots)
    except ValueError as e:
        print(f"determined.exec.launch: {e}", file=sys.stderr)
        return 1

    try:
        proc = subprocess.Popen(cmd)
    except OSError as e:
        print(f"determined.exec.launch: could not start {cmd[0]!r}: {e}", file=sys.stderr)
        return 127

    _lifetime.SignalForwarder(proc).install(FORWARDED_SIGNALS)
    returncode = proc.wait()
    return 128 - returncode if returncode < 0 else returncode


if __name__ == "__main__":
    sys.exit(main())
