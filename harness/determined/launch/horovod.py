"""Run a training script under ``horovodrun`` (deprecated in Determined 0.38).

Usage: ``python3 -m determined.launch.horovod [[HVD_OVERRIDES...] --] (--trial TRIAL)|(SCRIPT...)``

* Horovod installed (``horovodrun`` on PATH), one container: runs, as Determined does::

      horovodrun -np <slots> -p 12350 -H localhost:<slots> --start-timeout 1200
          --gloo-timeout-seconds 240 <optimizations args> [data.__det_dtrain_args]
          [HVD_OVERRIDES] -- python3 -m determined.launch.wrap_rank
          HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK -- SCRIPT...

  with ``USE_HOROVOD=1`` and ``DET_CHIEF_IP``. (Not tested here: Horovod is not installed in
  this project's environment.)
* Horovod not installed: a one-slot trial runs the script as a single process with the rank
  environment of rank 0 of 1 (``RANK``, ``WORLD_SIZE``, ``HOROVOD_RANK``, ... so that
  ``DistributedContext.from_torch_distributed()`` works); a multi-slot trial fails at once,
  saying to ``pip install horovod`` or to use ``determined.launch.torch_distributed``.
* Several containers (multi-node): not supported (horovodrun reaches other nodes over ssh, which
  the trial containers here do not run).

``--autohorovod`` (internal in Determined) runs a single-slot script directly even when
Horovod is installed.
"""

import argparse
import logging
import os
import shutil
import sys
import warnings
from typing import Any

from determined.launch import _common

logger = logging.getLogger("determined.launch.horovod")

LAUNCHER = "determined.launch.horovod"
DTRAIN_SSH_PORT = int(os.environ.get("DTRAIN_SSH_PORT") or "12350")
HOROVOD_STARTUP_TIMEOUT_SECONDS = 1200
HOROVOD_GLOO_TIMEOUT_SECONDS = 240
HOROVOD_AUTOTUNE_LOG_FILEPATH = "/tmp/autotune_log.csv"
WORKER_RANK_VARIABLES = "HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK"

DEPRECATION = (
    "determined.launch.horovod has been deprecated in Determined 0.38.0 and will be removed in a "
    "future version. For PyTorchTrial users, please switch to "
    "determined.launch.torch_distributed instead. For TFKerasTrial users, please migrate to the "
    "new det.keras.DeterminedCallback for training and use the new determined.launch.tensorflow "
    "launcher with it."
)


def parse_args(args: list[str]) -> tuple[list[str], list[str], bool]:
    """-> (horovodrun overrides, script, autohorovod), as Determined reads them: everything
    before the first ``--`` goes to horovodrun."""
    if "--" in args:
        split = args.index("--")
        hvd_args, args = args[:split], args[split + 1 :]
    else:
        hvd_args = []
    parser = argparse.ArgumentParser(
        prog=f"python3 -m {LAUNCHER}",
        usage="%(prog)s [[HVD_OVERRIDES...] --] (--trial TRIAL)|(SCRIPT...)",
        description="Launch a script under horovodrun on a Determined cluster.",
        epilog=(
            "HVD_OVERRIDES are passed to horovodrun after the arguments Determined sets; when "
            "given they must be terminated by `--`."
        ),
    )
    parser.add_argument("--trial", help="(deprecated) a Trial class, module:Class")
    parser.add_argument("script", metavar="SCRIPT...", nargs=argparse.REMAINDER)
    parser.add_argument("--autohorovod", action="store_true", help=argparse.SUPPRESS)
    parsed = parser.parse_args(args)
    script = list(parsed.script or [])
    if parsed.trial is not None:
        if script:
            parser.print_usage(sys.stderr)
            raise _common.LaunchError(f"extra arguments to --trial: {script}")
        script = _common.legacy_trial_script(parsed.trial)
    elif not script:
        parser.print_usage(sys.stderr)
        raise _common.LaunchError("empty script is not allowed")
    return hvd_args, script, bool(parsed.autohorovod)


def horovod_installed() -> bool:
    return shutil.which("horovodrun") is not None


def performance_args(optimizations: dict[str, Any]) -> list[str]:
    """horovodrun's tensor-fusion arguments from the config's ``optimizations``."""
    if optimizations.get("auto_tune_tensor_fusion"):
        args = ["--autotune", "--autotune-log-file", HOROVOD_AUTOTUNE_LOG_FILEPATH]
    else:
        args = [
            "--fusion-threshold-mb",
            str(optimizations.get("tensor_fusion_threshold", 64)),
            "--cycle-time-ms",
            str(optimizations.get("tensor_fusion_cycle_time", 1)),
        ]
    return args + [
        "--cache-capacity",
        "1024",
        "--no-hierarchical-allreduce",
        "--no-hierarchical-allgather",
    ]


def horovodrun_command(
    layout: _common.NodeLayout, config: dict[str, Any], hvd_args: list[str], script: list[str]
) -> list[str]:
    slots = layout.procs_per_node
    optional = list((config.get("data") or {}).get("__det_dtrain_args") or []) + hvd_args
    if config.get("debug"):
        optional.append("--mpi-args=-v --display-map")
    cmd = [
        "horovodrun",
        "-np", str(slots),
        "-p", str(DTRAIN_SSH_PORT),
        "-H", f"localhost:{slots}",
        "--start-timeout", str(HOROVOD_STARTUP_TIMEOUT_SECONDS),
        "--gloo-timeout-seconds", str(HOROVOD_GLOO_TIMEOUT_SECONDS),
        *performance_args(config.get("optimizations") or {}),
    ]  # fmt: skip
    if config.get("debug"):
        cmd.append("--verbose")
    return [
        *cmd,
        *optional,
        "--",
        sys.executable, "-m", "determined.launch.wrap_rank", WORKER_RANK_VARIABLES, "--",
        *script,
    ]  # fmt: skip


def not_installed_message(slots: int) -> str:
    return (
        f"this trial has {slots} slots, and running them under Horovod needs horovodrun, which "
        "is not installed: `pip install horovod` (built for your framework, e.g. "
        "HOROVOD_WITH_PYTORCH=1 pip install horovod), or use "
        "`python3 -m determined.launch.torch_distributed -- SCRIPT...` instead (Determined "
        "deprecated the horovod launcher in 0.38)"
    )


def _experiment_config() -> dict[str, Any]:
    import json

    try:
        return dict(json.loads(os.environ.get("DET_EXPERIMENT_CONFIG") or "{}"))
    except ValueError:
        return {}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s: [%(process)s] %(name)s: %(message)s"
    )
    try:
        hvd_args, script, autohorovod = parse_args(sys.argv[1:] if argv is None else argv)
        layout = _common.NodeLayout.from_env(LAUNCHER)
    except _common.LaunchError as e:
        print(f"{LAUNCHER}: {e}", file=sys.stderr)
        return 1

    env = dict(os.environ)
    env["DET_CHIEF_IP"] = layout.chief_ip
    single = layout.num_nodes == 1 and len(layout.slot_ids) <= 1
    installed = horovod_installed()
    if single and (autohorovod or not installed):
        if not installed and not autohorovod:
            logger.info("horovodrun is not installed: running the single-slot script directly")
        env.update(_common.single_process_environment())
        env.update(horovod_rank_environment())
        return _common.run_one(script, env, LAUNCHER)
    if not installed:
        print(f"{LAUNCHER}: {not_installed_message(layout.total_procs)}", file=sys.stderr)
        return 1
    if layout.num_nodes > 1:
        print(
            f"{LAUNCHER}: multi-node Horovod is not supported here (horovodrun reaches the "
            "other containers over ssh, which they do not run); use "
            "determined.launch.torch_distributed",
            file=sys.stderr,
        )
        return 1
    env["USE_HOROVOD"] = "1"
    env.pop("SLURM_JOBID", None)
    cmd = horovodrun_command(layout, _experiment_config(), hvd_args, script)
    logger.info("running %s", " ".join(cmd))
    return _common.run_one(cmd, env, LAUNCHER)


def horovod_rank_environment() -> dict[str, str]:
    """What horovodrun's gloo controller tells rank 0 of a one-process job."""
    names = ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE")
    values = (0, 1, 0, 1, 0, 1)
    return {f"HOROVOD_{n}": str(v) for n, v in zip(names, values, strict=True)}


if __name__ == "__main__":
    warnings.warn(DEPRECATION, FutureWarning, stacklevel=1)
    sys.exit(main())
