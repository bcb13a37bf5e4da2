"""A gateway kernel gets its own copy of the trial's files: the run's work dir is shipped into
the kernel (the kernel's machine need not see the master's), within a size limit; checkpoint
storage the kernel's machine lacks is named in the trial's log. Real Kernel Gateway on loopback,
whose kernels start in the gateway's own directory, not in the master's work dir."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from tests._support import MasterProcess, submit, wait_for_experiment, wait_until
from tests.master_lite.runners.kernel.test_gateway import (  # noqa: F401 (a fixture)
    TOKEN,
    gateway,
    gateway_kernels,
)
from tests.master_lite.runners.kernel.test_kernels import SINGLE, config

READER = """
import hashlib, os
import helper  # a module of the context, beside the script
with open("data/numbers.txt") as f:
    print("SUM", helper.total(f.read().split()))
print("CWD", os.getcwd())
with open("data/blob.txt", "rb") as f:
    print("BLOB", hashlib.sha256(f.read()).hexdigest())
"""
HELPER = "def total(words):\n    return sum(int(w) for w in words)\n"


def gateway_config(gateway_url: str, entrypoint: str) -> dict:
    cfg = config(searcher=SINGLE, step_sleep=0, kernel={"gateway": gateway_url})
    cfg["entrypoint"] = entrypoint
    return cfg


def test_the_trials_files_are_shipped_into_a_gateway_kernel(
    start_master: Callable[..., MasterProcess],
    gateway: str,  # noqa: F811
) -> None:
    master = start_master(env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN})
    cfg = gateway_config(gateway, "python3 src/read.py")
    files = {
        "src/read.py": READER,
        "src/helper.py": HELPER,
        "data/numbers.txt": "1 2 3 4\n",
        # Incompressible enough to take more than one cell (CHUNK_BYTES of base64 each).
        "data/blob.txt": os.urandom(3 * 2**20).hex(),
    }
    exp_id = submit(master, cfg, files)
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    logs = master.logs(trial["id"])
    assert "SUM 10" in logs, logs
    blob = hashlib.sha256(files["data/blob.txt"].encode()).hexdigest()
    assert f"BLOB {blob}" in logs
    assert any(line.startswith("sent the trial's files to the kernel (") for line in logs)
    (cwd,) = [line.split(" ", 1)[1] for line in logs if line.startswith("CWD ")]
    work_dir = master.root_dir / "trials" / str(trial["id"]) / "run-1"
    assert Path(cwd) != work_dir and not Path(cwd).is_relative_to(master.root_dir)
    # The copy goes with the kernel.
    wait_until(lambda: gateway_kernels(gateway) == [], 30, "the gateway's kernel to end")
    wait_until(lambda: not os.path.exists(cwd), 30, "the kernel's copy of the files to go")


def test_files_over_the_limit_end_the_run_with_the_limit_named(
    start_master: Callable[..., MasterProcess],
    gateway: str,  # noqa: F811
) -> None:
    master = start_master(
        env={"JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN, "MASTER_LITE_KERNEL_GATEWAY_FILES_LIMIT": "4096"}
    )
    files = {"s.py": "print('never')\n", "data.bin": os.urandom(64 * 1024).hex()}
    exp_id = submit(master, gateway_config(gateway, "python3 s.py"), files)
    wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    assert trial["state"] == "ERROR"
    logs = "\n".join(master.logs(trial["id"]))
    assert (
        "could not run the trial in kernel 'python3': the trial's files (its context, unpacked in "
    ) in logs, logs
    assert (
        "are over 4,096 bytes compressed, the most a kernel on a Jupyter Gateway is sent "
        "(MasterLite.kernel_gateway_files_limit)"
    ) in logs
    assert "never" not in logs
    wait_until(lambda: gateway_kernels(gateway) == [], 30, "the gateway's kernel to end")


def test_checkpoint_storage_the_gateway_lacks_is_named_in_the_log(
    start_master: Callable[..., MasterProcess],
    gateway: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    # Storage outside the master's root dir must be allowed (MasterLite.checkpoint_storage_roots).
    master = start_master(
        env={
            "JUPYTER_GATEWAY_AUTH_TOKEN": TOKEN,
            "MASTER_LITE_CHECKPOINT_STORAGE_ROOTS": str(tmp_path),
        }
    )
    cfg = gateway_config(gateway, "python3 s.py")
    elsewhere = tmp_path / "storage-on-the-master-only"
    cfg["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(elsewhere)}
    exp_id = submit(master, cfg, {"s.py": "print('ran')\n"})
    assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
    (trial,) = master.trials(exp_id)
    logs = master.logs(trial["id"])
    assert any(
        line.startswith(f"checkpoint_storage: {elsewhere} does not exist on the gateway's machine")
        for line in logs
    ), logs
