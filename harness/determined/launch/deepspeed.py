"""Run a training script under DeepSpeed's launcher.

Usage: ``python3 -m determined.launch.deepspeed [--] (--trial TRIAL)|(SCRIPT...)``

* DeepSpeed installed (``deepspeed`` on PATH), one container: runs, as Determined does::

      deepspeed --master_addr localhost --no_python --no_local_rank [--no_ssh_check] --
          python3 -m determined.launch.wrap_rank RANK -- SCRIPT...

  with ``USE_DEEPSPEED=1`` and ``DET_CHIEF_IP``; DeepSpeed gives each worker ``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_SIZE``, ``CROSS_RANK``, ``CROSS_SIZE`` (read by
  ``DistributedContext.from_deepspeed()``). (Not tested here: DeepSpeed is not installed in this
  project's environment.)
* DeepSpeed not installed: a one-slot trial runs the script as a single process with
  ``USE_DEEPSPEED=1`` and the rank environment of rank 0 of 1; a multi-slot trial fails at once,
  saying to ``pip install deepspeed`` or to use ``determined.launch.torch_distributed``.
* Several containers (multi-node): not supported (DeepSpeed reaches other nodes with pdsh over
  ssh, which the trial containers here do not run).
"""

import argparse
import logging
import os
import re
import shutil
import sys
import warnings
from importlib import metadata

from determined.launch import _common

logger = logging.getLogger("determined.launch.deepspeed")

LAUNCHER = "determined.launch.deepspeed"


def parse_args(args: list[str]) -> list[str]:
    """``(--trial TRIAL)|(SCRIPT...)`` -> the script; a leading ``--`` is allowed."""
    parser = argparse.ArgumentParser(
        prog=f"python3 -m {LAUNCHER}",
        usage="%(prog)s [--] (--trial TRIAL)|(SCRIPT...)",
        description="Launch a script under deepspeed on a Determined cluster.",
    )
    parser.add_argument("--trial", help="(deprecated) a Trial class, module:Class")
    parser.add_argument("script", metavar="SCRIPT...", nargs=argparse.REMAINDER)
    if args[:1] == ["--"]:
        args = args[1:]
        script = list(args)
        trial = None
    else:
        parsed = parser.parse_args(args)
        script = list(parsed.script or [])
        trial = parsed.trial
    if script[:1] == ["--"]:
        script = script[1:]
    if trial is not None:
        if script:
            parser.print_usage(sys.stderr)
            raise _common.LaunchError(f"extra arguments to --trial: {script}")
        warnings.warn(
            "Support for --trial argument to determined.launch.deepspeed has been deprecated in "
            "Determined 0.38.0: use a script that trains with det.pytorch.deepspeed.Trainer().",
            FutureWarning,
            stacklevel=2,
        )
        script = _common.legacy_trial_script(trial)
    elif not script:
        parser.print_usage(sys.stderr)
        raise _common.LaunchError("empty script is not allowed")
    return script


def deepspeed_installed() -> bool:
    return shutil.which("deepspeed") is not None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def deepspeed_command(script: list[str], version: str | None = None) -> list[str]:
    if version is None:
        try:
            version = metadata.version("deepspeed")
        except metadata.PackageNotFoundError:
            version = "0"
    cmd = ["deepspeed", "--master_addr", "localhost", "--no_python", "--no_local_rank"]
    if _version(version) > (0, 6, 4):
        cmd.append("--no_ssh_check")
    return [
        *cmd,
        "--",
        sys.executable, "-m", "determined.launch.wrap_rank", "RANK", "--",
        *script,
    ]  # fmt: skip


def not_installed_message(slots: int) -> str:
    return (
        f"this trial has {slots} slots, and running them under DeepSpeed needs the deepspeed "
        "launcher, which is not installed: `pip install deepspeed`, or use "
        "`python3 -m determined.launch.torch_distributed -- SCRIPT...` instead"
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s: [%(process)s] %(name)s: %(message)s"
    )
    try:
        script = parse_args(sys.argv[1:] if argv is None else argv)
        layout = _common.NodeLayout.from_env(LAUNCHER)
    except _common.LaunchError as e:
        print(f"{LAUNCHER}: {e}", file=sys.stderr)
        return 1

    env = dict(os.environ)
    env["DET_CHIEF_IP"] = layout.chief_ip
    # Determined sets it even for one slot, "to initialize the context correctly".
    env["USE_DEEPSPEED"] = "1"
    installed = deepspeed_installed()
    if layout.num_nodes == 1 and len(layout.slot_ids) <= 1 and not installed:
        logger.info("deepspeed is not installed: running the single-slot script directly")
        env.update(_common.single_process_environment())
        return _common.run_one(script, env, LAUNCHER)
    if not installed:
        print(f"{LAUNCHER}: {not_installed_message(layout.total_procs)}", file=sys.stderr)
        return 1
    if layout.num_nodes > 1:
        print(
            f"{LAUNCHER}: multi-node DeepSpeed is not supported here (it reaches the other "
            "containers with pdsh over ssh, which they do not run); use "
            "determined.launch.torch_distributed",
            file=sys.stderr,
        )
        return 1
    dtrain_interface = env.get("DET_INTER_NODE_NETWORK_INTERFACE")
    if (
        env.get("CUDA_VISIBLE_DEVICES", "").strip()
        and not env.get("NCCL_SOCKET_IFNAME", "").strip()
    ):
        if dtrain_interface:
            env["NCCL_SOCKET_IFNAME"] = dtrain_interface
    cmd = deepspeed_command(script)
    logger.info("running %s", " ".join(cmd))
    return _common.run_one(cmd, env, LAUNCHER)


if __name__ == "__main__":
    sys.exit(main())
