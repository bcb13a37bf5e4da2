"""Attach: where a person reaches the kernel of a kernel trial (its latest run, running or kept
for post-mortem after a failure), with a clear answer when there is none."""

from __future__ import annotations

from master_lite import errors
from master_lite._core._views import Views
from master_lite.runners import Runner, kernel_settings


def trial_kernel(views: Views, runner: Runner, trial_id: int) -> dict:
    """The connection info of the trial's kernel; NotFound for an unknown trial, Conflict when
    it does not run in a kernel or its kernel is gone."""
    trial = views.trial_row(trial_id)
    experiment = views.experiment_row(trial.experiment_id)
    settings = kernel_settings(experiment.config)
    if settings is None:
        raise errors.Conflict(
            f"trial {trial_id} does not run in a kernel (its experiment {experiment.id} has no "
            "environment.kernel; add `environment: {kernel: {}}` to run trials in kernels)"
        )
    allocation_id = f"trial-{trial_id}.{trial.run_id}"
    info = runner.attach_info(allocation_id) if trial.run_id else {}
    if "kernel" not in info and "gateway" not in info:
        if not trial.run_id:
            why = "it has not started yet; attach once it runs"
        elif settings.keep_alive > 0:
            why = (
                f"it is {trial.state} and its kernel has been shut down (the kernel of a failed "
                f"run is kept environment.kernel.keep_alive = {settings.keep_alive:g} s; a run "
                "that succeeded or was stopped ends its kernel at once)"
            )
        else:
            why = f"it is {trial.state} and its kernel has been shut down (keep_alive is 0)"
        raise errors.Conflict(f"trial {trial_id} has no kernel to attach to: {why}")
    return {
        "trial_id": trial_id,
        "allocation_id": allocation_id,
        "state": trial.state,
        "post_mortem": allocation_id not in runner.running(),
        **info,
    }


__all__ = ["trial_kernel"]
