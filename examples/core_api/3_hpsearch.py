"""Stage 3: a hyperparameter search driven by the master's searcher operations (≤0.37 form).

Each op asks "train until your total reaches op.length batches, then validate". ASHA hands out
short ops to many trials and longer ops only to the best ones.
"""

import logging
import pathlib
import sys
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
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            x, starting_batch = load_state(trial_id, path)

    batch = starting_batch
    # A resumed trial's state at starting_batch is already in its checkpoint.
    last_checkpoint_batch = starting_batch if latest_checkpoint is not None else None
    for op in core_context.searcher.operations():
        while batch < op.length:
            x += increment_by
            steps_completed = batch + 1
            time.sleep(0.1)
            logging.info(f"x is now {x}")
            if steps_completed % 10 == 0:
                core_context.train.report_training_metrics(
                    steps_completed=steps_completed, metrics={"x": x}
                )
                op.report_progress(steps_completed)
                checkpoint_metadata = {"steps_completed": steps_completed}
                with core_context.checkpoint.store_path(checkpoint_metadata) as (path, uuid):
                    save_state(x, steps_completed, trial_id, path)
                last_checkpoint_batch = steps_completed
                if core_context.preempt.should_preempt():
                    return
            batch += 1
        core_context.train.report_validation_metrics(steps_completed=batch, metrics={"x": x})
        op.report_completed(x)

    # The last op may end between checkpoints: save the final state so nothing is lost.
    if last_checkpoint_batch != batch:
        with core_context.checkpoint.store_path({"steps_completed": batch}) as (path, uuid):
            save_state(x, batch, trial_id, path)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    if info is None:
        print(
            "3_hpsearch.py only runs on the master (its hyperparameters and searcher operations come "
            "from there): submit it with `det e create 3_hpsearch.yaml .`",
            file=sys.stderr,
        )
    assert info is not None, "this example only runs on-cluster"
    latest_checkpoint = info.latest_checkpoint
    trial_id = info.trial.trial_id
    hparams = info.trial.hparams

    with det.core.init() as core_context:
        main(
            core_context=core_context,
            latest_checkpoint=latest_checkpoint,
            trial_id=trial_id,
            increment_by=hparams["increment_by"],
        )
