"""Submit-time checks of Trial and Native API experiments (`determined.common.trial_checks`):
the entrypoint's class exists in the uploaded context and `hyperparameters.global_batch_size` is
there when the API needs it — a 400 naming the field now, not "exited with code 1" ten seconds
later with the reason in the trial's log."""

from __future__ import annotations

from determined.common import trial_checks
from master_lite import errors


def check_trial_api(config: dict, context: bytes | None, *, size_limit: int) -> None:
    """InvalidRequest listing every problem; nothing for a Core API script. Reads at most the
    entrypoint's module from `context` (run it off the event loop: it decompresses)."""
    if trial_checks.native_api(config) is None and trial_checks.trial_class_ref(config) is None:
        return  # a script: nothing to read
    read = None if context is None else trial_checks.tarball_reader(context, size_limit)
    problems = trial_checks.trial_api_problems(config, read)
    if problems:
        raise errors.InvalidRequest(
            f"invalid experiment: {len(problems)} error(s): " + "; ".join(problems), problems
        )
