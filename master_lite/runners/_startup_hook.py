"""`startup-hook.sh`: a context directory's setup script, sourced before the entrypoint.

Determined's trial container entrypoint does, in the context directory::

    set -e
    set -x
    test -f startup-hook.sh && source startup-hook.sh
    set +x
    exec python3 -m determined.exec.launch <entrypoint>

so the hook runs in the entrypoint's shell (variables it exports reach the trial), its commands
are echoed to the trial's log (`set -x`), and its first failing command ends the trial with that
command's exit status. `with_startup_hook` wraps a trial's argv the same way, whatever the
entrypoint (script, Trial class, notebook), and adds a log line naming the hook and its exit
code when it fails. A wrapped argv is never `python3 <script.py>`, so such a trial starts a
fresh interpreter instead of a pre-started one (which has already started without the hook).
"""

from __future__ import annotations

import shutil
from pathlib import Path

STARTUP_HOOK = "startup-hook.sh"

# "$0" is the hook's name; "$@" the entrypoint's argv.
_SCRIPT = """\
__det_hook_done=0
trap '{ __det_rc=$?; set +x; } 2>/dev/null
if [ "$__det_hook_done" != 1 ]; then
  if [ "$__det_rc" = 0 ]; then
    echo "$0 exited (exit code 0) before the entrypoint ran" >&2
  else
    echo "$0 failed with exit code $__det_rc; the entrypoint did not run" >&2
  fi
fi' EXIT
set -e
set -x
. "./$0"
{ set +x; } 2>/dev/null
set +e
__det_hook_done=1
trap - EXIT
unset __det_hook_done
exec "$@"
"""


def has_startup_hook(work_dir: Path | str) -> bool:
    """Whether the unpacked context in `work_dir` has a startup hook at its top level."""
    return (Path(work_dir) / STARTUP_HOOK).is_file()


def with_startup_hook(argv: list[str], shell: str | None = None) -> list[str]:
    """`argv`, run after sourcing ./startup-hook.sh in a shell (bash where there is one, as in
    Determined, so hooks may use bash syntax; else sh)."""
    shell = shell or ("bash" if shutil.which("bash") else "sh")
    return [shell, "-c", _SCRIPT, STARTUP_HOOK, *argv]


__all__ = ["STARTUP_HOOK", "has_startup_hook", "with_startup_hook"]
