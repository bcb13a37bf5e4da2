"""The kernel runner's sandbox provisioner (`runners/kernel/_sandbox.py`) on a Jupyter server's
kind of kernel manager: only the kernels a trial starts get it (a notebook's kernels started by
the same manager are untouched), their connection file leaves the runtime dir, and kernelspecs
with a provisioner of their own are left alone."""

from __future__ import annotations

import asyncio
import os
import subprocess
import types
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.multikernelmanager import AsyncMultiKernelManager
from jupyter_client.provisioning import LocalProvisioner

from master_lite.runners.kernel._sandbox import (
    SandboxProvisioner,
    install,
    preset,
    sandboxed,
    start_sandboxed,
)
from master_lite.runners.process._sandbox import sandbox_argv

pytestmark = pytest.mark.slow


def _problem() -> str | None:
    result = subprocess.run(
        [*sandbox_argv(())[:-1], "--probe"], capture_output=True, text=True, timeout=60
    )
    return None if result.returncode == 0 else result.stderr.strip() or "probe failed"


def test_only_the_trials_kernels_start_sandboxed(tmp_path: Path) -> None:
    if _problem():
        pytest.skip(f"this platform cannot sandbox trials: {_problem()}")
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    private = tmp_path / "private"
    private.mkdir()
    (private / "token").write_text("secret")
    prefix = sandbox_argv([private, runtime], watch_parent=True)

    async def scenario() -> None:
        kernels = AsyncMultiKernelManager(connection_dir=str(runtime))
        install(kernels)
        install(kernels)  # once is enough: the wrapper is not stacked
        try:
            plain_id = await kernels.start_kernel(kernel_name="python3")
            trial_id = await start_sandboxed(kernels, prefix, kernel_name="python3")
            again_id = await kernels.start_kernel(kernel_name="python3")
            plain, again = kernels.get_kernel(plain_id), kernels.get_kernel(again_id)
            trial: Any = kernels.get_kernel(trial_id)
            assert not sandboxed(plain) and not sandboxed(again)
            assert type(plain.provisioner) is LocalProvisioner
            assert isinstance(trial.provisioner, SandboxProvisioner)
            # Its connection file is outside the (hidden) runtime dir; the others' in it.
            assert Path(plain.connection_file).parent == runtime
            connection = Path(trial.connection_file)
            assert connection.exists() and runtime not in connection.parents
            # The trampoline leads the kernel's process group, as the kernel itself did.
            process: Any = trial.provisioner.process
            assert process.args[: len(prefix)] == prefix
            assert os.getpgid(process.pid) == process.pid
            # A restart keeps the sandbox (the provisioner is kept), and the connection file.
            await trial.restart_kernel()
            assert sandboxed(trial) and Path(trial.connection_file) == connection
            process = trial.provisioner.process
            assert process.args[: len(prefix)] == prefix
        finally:
            await kernels.shutdown_all(now=True)
        assert not connection.parent.exists()  # the private dir goes with the kernel

    asyncio.run(scenario())


def test_a_kernelspec_with_its_own_provisioner_is_left_alone() -> None:
    spec = types.SimpleNamespace(
        metadata={"kernel_provisioner": {"provisioner_name": "remote-provisioner"}}
    )
    km = types.SimpleNamespace(provisioner=None, kernel_spec=spec, kernel_id="k")
    assert preset(km, ["trampoline", "--"]) is False
    assert km.provisioner is None
    assert preset(km, []) is False  # nothing to wrap with: sandbox off or unavailable
