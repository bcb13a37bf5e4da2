"""A local kernel trial run as another Unix account (`LaunchSpec.run_as`; the master is root).

The kernel gets no sandbox (that account cannot read the master's secrets) and no warm kernel
(those are the master's); it runs with the account's uid, gid and groups, umask 077, its
HOME/USER/LOGNAME, the interpreter it can execute (`LaunchSpec.python` in place of the master's
in the kernelspec's command) and its connection file in a private directory of its own
(`_sandbox.SandboxProvisioner`, given the account through `_sandbox.starting_as`). Kernels of a
hosting Jupyter server or of a Jupyter Gateway run as their server's user: `run_as` is refused
for those (`refuse_unless_own_kernel`).
"""

from __future__ import annotations

from master_lite.runners._base import LaunchSpec, Runner, refuse_run_as
from master_lite.runners.kernel._handles import LocalKernel
from master_lite.runners.kernel._sandbox import starting_as
from master_lite.runners.process import account_environment, process_environment


def refuse_unless_own_kernel(runner: Runner, spec: LaunchSpec, elsewhere: bool) -> None:
    """NotImplementedError (naming what to change) for a run as another account whose kernel
    would start `elsewhere` (on a gateway, or by the hosting Jupyter server)."""
    if elsewhere:
        refuse_run_as(runner, spec, "environment.kernel")


def start_as_owner(spec: LaunchSpec, kernelspec: str) -> LocalKernel:
    """Start the run's kernel (of `kernelspec`) as `spec.run_as`, in its work dir."""
    run_as = spec.run_as
    if run_as is None:
        raise ValueError(f"{spec.allocation_id}: no run_as")
    uid, gid, groups = run_as.ids()
    env = process_environment(spec.env, spec.python)
    env.update(account_environment(run_as))
    env.update(spec.env)  # the run's own variables still win
    with starting_as((uid, uid if gid is None else gid, groups), spec.python):
        return LocalKernel(kernelspec, env, str(spec.work_dir))


__all__ = ["refuse_unless_own_kernel", "start_as_owner"]
