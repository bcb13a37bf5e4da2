"""CHECKPOINTING_SCRIPT, the fault-tolerance tests' trial, and the helpers that read what it
reports through a master (its clean series, the steps it reported, where each run resumed)."""

from __future__ import annotations

from tests._support.master import MasterProcess

# A trial like the Core API tutorial's stage 2, for fault-tolerance tests: x grows by
# hparams.increment_by per step for 100 steps; training metrics every 10 steps, a checkpoint every
# 30 (so a crash can lose reported steps that were never checkpointed), a preemption check every
# 10 (checkpointing before it exits). The state file holds "x,steps,trial_id"; a checkpoint of
# another trial (a warm start) keeps x but starts again at step 0. STEP_SLEEP sets the pace.
CHECKPOINTING_SCRIPT = """
import logging, os, pathlib, time
import determined as det

def save(core, x, step, trial_id):
    with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
        (path / "state").write_text(f"{x},{step},{trial_id}")

def main(core, info):
    inc = info.trial.hparams["increment_by"]
    trial_id = info.trial.trial_id
    x, start = 0, 0
    print(f"latest checkpoint {info.latest_checkpoint}", flush=True)
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            x, start, owner = map(int, (pathlib.Path(path) / "state").read_text().split(","))
        if owner != trial_id:
            start = 0
    print(f"starting at step {start} with x {x}", flush=True)
    sleep = float(os.environ.get("STEP_SLEEP", "0.05"))
    for step in range(start + 1, 101):
        x += inc
        time.sleep(sleep)
        if step % 10:
            continue
        core.train.report_training_metrics(steps_completed=step, metrics={"x": x})
        core.train.report_progress(step / 100)
        if step % 30 == 0 or step == 100:
            save(core, x, step, trial_id)
        if core.preempt.should_preempt():
            if step % 30:
                save(core, x, step, trial_id)
            print(f"preempted at step {step}", flush=True)
            return
    core.train.report_validation_metrics(steps_completed=100, metrics={"x": x})

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    with det.core.init() as core:
        main(core, info)
"""


def clean_series(increment_by: int, start_x: int = 0) -> dict[str, list[tuple[int, dict]]]:
    """What one uninterrupted run of CHECKPOINTING_SCRIPT reports."""
    return {
        "training": [(s, {"x": start_x + s * increment_by}) for s in range(10, 101, 10)],
        "validation": [(100, {"x": start_x + 100 * increment_by})],
    }


def assert_clean_series(master: MasterProcess, trial: dict) -> None:
    """The trial reported exactly one uninterrupted run's metrics (none lost, none twice)."""
    expected = clean_series(trial["hparams"]["increment_by"])
    assert master.series(trial["id"], "training") == expected["training"]
    assert master.series(trial["id"], "validation") == expected["validation"]


def resumed_from(master: MasterProcess, trial_id: int) -> list[int]:
    """The step each run of the trial started at (from its own log lines)."""
    return [
        int(line.split()[3])
        for line in master.logs(trial_id)
        if line.startswith("starting at step ")
    ]


def reported_steps(master: MasterProcess, trial_id: int) -> list[int]:
    """The steps of the trial's training metrics, in the order the master stored them."""
    return [s for s, _ in master.series(trial_id, "training")]
