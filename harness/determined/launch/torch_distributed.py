"""Run a training script once per slot under torchrun.

Usage: ``python3 -m determined.launch.torch_distributed [TORCHRUN_OVERRIDES... --] SCRIPT...``

Runs, on each container of the trial::

    python3 -m torch.distributed.run --nnodes <#containers> --nproc_per_node <#slots here>
        --node_rank <container rank> --max_restarts 0 --master_addr <addr> --master_port <port>
        [OVERRIDES] --module determined.launch.wrap_rank RANK -- SCRIPT...

so each worker gets torchrun's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/... (read by
``DistributedContext.from_torch_distributed()``) and its output lines carry ``[rank=N]``.
``max_restarts 0`` means one crashed worker stops all of them and the launcher exits non-zero.
"""

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

from determined.launch import _common, _lifetime
from determined.launch._common import LaunchError, NodeLayout

logger = logging.getLogger("determined.launch.torch_distributed")

DEFAULT_C10D_PORT = 29400

# torchrun handles these by stopping its workers; anything else would just kill it.
FORWARDED_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """``[OVERRIDES... --] SCRIPT...`` -> (overrides, script)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return [], argv


def parse_args(argv: list[str]) -> tuple[list[str], list[str]]:
    overrides, script = split_overrides(argv)
    if "--trial" in overrides or (script[:1] == ["--trial"]):
        # Determined <= 0.37 form: `--trial module:Class` runs a legacy Trial class.
        source = overrides if "--trial" in overrides else script
        i = source.index("--trial")
        if i + 1 >= len(source):
            raise LaunchError("--trial needs a value: --trial module:TrialClass")
        trial = source[i + 1]
        logger.warning("--trial is deprecated: use `entrypoint: module:TrialClass` in the config")
        rest = source[:i] + source[i + 2 :]
        if source is overrides:
            overrides = rest
        script = ["python3", "-m", "determined.exec.harness", trial]
    if not script:
        raise LaunchError(
            "no script to run: python3 -m determined.launch.torch_distributed "
            "[TORCHRUN_OVERRIDES... --] SCRIPT..."
        )
    return overrides, script


def torchrun_command(
    layout: NodeLayout,
    overrides: list[str],
    script: list[str],
    *,
    python: str = sys.executable,
    master_port: int | None = None,
) -> list[str]:
    if master_port is None:
        master_port = int(os.environ.get("C10D_PORT") or DEFAULT_C10D_PORT)
    master_addr = "localhost" if layout.num_nodes == 1 else layout.chief_ip
    return [
        python, "-m", "torch.distributed.run",
        "--nnodes", str(layout.num_nodes),
        "--nproc_per_node", str(layout.procs_per_node),
        "--node_rank", str(layout.container_rank),
        "--max_restarts", "0",
        "--master_addr", master_addr,
        "--master_port", str(master_port),
        *overrides,
        "--module", "determined.launch.wrap_rank", "RANK", "--",
        *script,
    ]  # fmt: skip


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(n: int) -> list[int]:
    # Hold every socket until all are bound, so the n ports are distinct.
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def single_node_ports(env: dict) -> dict:
    """Ports for a one-container trial, so two trials on one machine do not collide.

    Several trials may run side by side on one host (the local resource manager runs them as
    plain processes). Nobody outside this node needs these ports, so unless they are set
    explicitly we keep torchrun's default when it is free and pick free ports otherwise.
    """
    spare = iter(_free_ports(3))
    chosen = {}
    if not env.get("C10D_PORT"):
        port = DEFAULT_C10D_PORT if _port_is_free(DEFAULT_C10D_PORT) else next(spare)
        chosen["C10D_PORT"] = str(port)
    if not env.get("INTER_TRAIN_PROCESS_COMM_PORT_1"):
        # For DistributedContext.from_torch_distributed() in the workers.
        chosen["INTER_TRAIN_PROCESS_COMM_PORT_1"] = str(next(spare))
        if not env.get("INTER_TRAIN_PROCESS_COMM_PORT_2"):
            chosen["INTER_TRAIN_PROCESS_COMM_PORT_2"] = str(next(spare))
    return chosen


def _preexec_torchrun() -> None:
    # If we are SIGKILLed, torchrun (in its own process group, so a group-wide signal reaches it
    # exactly once, through us) still gets a SIGTERM and stops its workers.
    _lifetime.signal_me_when_parent_dies(signal.SIGTERM)
    os.setpgid(0, 0)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s: [%(process)s] %(name)s: %(message)s"
    )
    try:
        overrides, script = parse_args(sys.argv[1:] if argv is None else argv)
        layout = NodeLayout.from_env()
    except LaunchError as e:
        print(f"determined.launch.torch_distributed: {e}", file=sys.stderr)
        return 1

    pgid_dir = tempfile.mkdtemp(prefix="det-launch-")
    env = dict(os.environ)
    env["USE_TORCH_DISTRIBUTED"] = "True"
    env["DET_CHIEF_IP"] = layout.chief_ip
    env[_lifetime.PGID_DIR_ENV] = pgid_dir
    if layout.num_nodes == 1:
        env.update(single_node_ports(env))
    # Across nodes: gloo/NCCL on the interface that routes to the chief, unless the user chose.
    interface = _common.rendezvous_interface_environment(layout, env)
    if interface:
        logger.info("rendezvous interface: %s", interface)
        env.update(interface)
    master_port = int(env.get("C10D_PORT") or DEFAULT_C10D_PORT)
    cmd = torchrun_command(layout, overrides, script, master_port=master_port)
    logger.info("running %s", " ".join(cmd))
    try:
        torchrun = subprocess.Popen(cmd, env=env, preexec_fn=_preexec_torchrun)
    except OSError as e:
        shutil.rmtree(pgid_dir, ignore_errors=True)
        print(f"determined.launch.torch_distributed: cannot start torchrun: {e}", file=sys.stderr)
        return 1

    _lifetime.SignalForwarder(torchrun).install(FORWARDED_SIGNALS)
    try:
        returncode = torchrun.wait()
    finally:
        leftovers = _lifetime.kill_recorded_process_groups(pgid_dir)
        shutil.rmtree(pgid_dir, ignore_errors=True)
    if leftovers:
        logger.debug("signalled %d leftover worker process group(s)", leftovers)
    if returncode < 0:
        return 128 - returncode
    return returncode


if __name__ == "__main__":
    sys.exit(main())
