"""Stage 4: the same training loop on every slot of the trial.

This script is both the launcher and the worker. The master runs ``4_distributed.py launcher``
once per container; the launcher starts one ``worker`` process per slot, each wrapped in
``determined.launch.wrap_rank`` so its log lines carry ``[rank=N]``. The workers build a
DistributedContext and use it to combine their work: every batch, x grows by the sum of every
worker's increment_by, so with 8 slots x ends at 800 * increment_by.

Real jobs would rather use a launcher such as ``python3 -m determined.launch.torch_distributed``;
this one shows what such a launcher does.
"""

import logging
import pathlib
import queue
import subprocess
import sys
import threading
import time

import determined as det


def save_state(x, steps_completed, trial_id, checkpoint_directory):
    with checkpoint_directory.joinpath("state").open("w") as f:
        f.write(f"{x},{steps_completed},{trial_id}")


def load_state(trial_id, checkpoint_directory):
    checkpoint_directory = pathlib.Path(checkpoint_directory)
    with checkpoint_directory.joinpath("state").open("r") as f:
        x, steps_completed, ckpt_trial_id = [int(field) for field in f.read().split(",")]
    if ckpt_trial_id == trial_id:
        return x, steps_completed
    return x, 0


def main(core_context, latest_checkpoint, trial_id, increment_by):
    x = 0
    starting_batch = 0
    if latest_checkpoint is not None:
        # restore_path is collective: every worker downloads (or shares) the checkpoint.
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            x, starting_batch = load_state(trial_id, path)

    for batch in range(starting_batch, 100):
        # Every worker contributes its increment_by; allgather returns them ordered by rank.
        all_increment_bys = core_context.distributed.allgather(increment_by)
        x += sum(all_increment_bys)
        steps_completed = batch + 1
        time.sleep(0.1)
        # Logs from one worker are easier to read than the same line eight times.
        if core_context.distributed.rank == 0:
            logging.info(f"x is now {x}")
        if steps_completed % 10 == 0:
            # Only the chief reports metrics and progress, and stores checkpoints.
            if core_context.distributed.rank == 0:
                core_context.train.report_training_metrics(
                    steps_completed=steps_completed, metrics={"x": x}
                )
                core_context.train.report_progress(steps_completed / 100.0)
                core_context.train.report_validation_metrics(
                    steps_completed=steps_completed, metrics={"x": x}
                )
                checkpoint_metadata = {"steps_completed": steps_completed}
                with core_context.checkpoint.store_path(checkpoint_metadata) as (path, uuid):
                    save_state(x, steps_completed, trial_id, path)
            # Every worker asks: the chief asks the master and tells the others (WorkersAskChief),
            # so they all stop at the same batch.
            if core_context.preempt.should_preempt():
                return


def launcher_main(slots_per_node, num_nodes, cross_rank):
    # One worker per slot on this node, with globally unique ranks.
    procs = []
    for local_rank in range(slots_per_node):
        rank = cross_rank * slots_per_node + local_rank
        # wrap_rank prefixes each line of output with "[rank=N] ". sys.executable is the
        # python3 running us, so the workers see the same installed packages.
        cmd = [
            sys.executable, "-m", "determined.launch.wrap_rank", str(rank), "--",
            sys.executable, __file__, "worker", str(rank), str(local_rank),
        ]  # fmt: skip
        procs.append(subprocess.Popen(cmd))

    # Wait for every worker, but stop them all as soon as one fails: the survivors would block
    # forever in the next collective.
    exit_codes = queue.Queue()

    def wait_for(proc):
        exit_codes.put((proc, proc.wait()))

    for proc in procs:
        threading.Thread(target=wait_for, args=(proc,), daemon=True).start()

    for _ in procs:
        proc, exit_code = exit_codes.get()
        if exit_code != 0:
            logging.error(f"worker {proc.args} exited with {exit_code}; stopping the others")
            for other in procs:
                if other.poll() is None:
                    other.kill()
            return exit_code
    return 0


def worker_main(slots_per_node, num_nodes, cross_rank, chief_ip, rank, local_rank):
    distributed = det.core.DistributedContext(
        rank=rank,
        size=num_nodes * slots_per_node,
        local_rank=local_rank,
        local_size=slots_per_node,
        cross_rank=cross_rank,
        cross_size=num_nodes,
        chief_ip=chief_ip,
    )
    with det.core.init(distributed=distributed) as core_context:
        main(
            core_context=core_context,
            latest_checkpoint=latest_checkpoint,
            trial_id=trial_id,
            increment_by=hparams["increment_by"],
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    if info is None:
        print(
            "4_distributed.py only runs on the master (the launcher needs to know the trial's "
            "slots and containers): submit it with `det e create 4_distributed.yaml .`",
            file=sys.stderr,
        )
    assert info is not None, "this example only runs on-cluster"
    latest_checkpoint = info.latest_checkpoint
    trial_id = info.trial.trial_id
    hparams = info.trial.hparams

    # A CPU-only trial has no slot ids but still runs one worker.
    slots_per_node = max(1, len(info.slot_ids))
    num_nodes = len(info.container_addrs)
    cross_rank = info.container_rank
    chief_ip = info.container_addrs[0]

    if sys.argv[1:2] == ["launcher"]:
        sys.exit(launcher_main(slots_per_node, num_nodes, cross_rank))
    if sys.argv[1:2] == ["worker"]:
        sys.exit(
            worker_main(
                slots_per_node,
                num_nodes,
                cross_rank,
                chief_ip,
                rank=int(sys.argv[2]),
                local_rank=int(sys.argv[3]),
            )  # fmt: skip
        )
    raise ValueError(f"usage: {sys.argv[0]} launcher | worker RANK LOCAL_RANK (got {sys.argv[1:]})")
