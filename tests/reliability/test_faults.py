"""Random faults during a search: SIGKILL of trial processes and of the master, at moments
drawn from a fixed seed. Every experiment must complete, and every trial's stored metrics must
equal an uninterrupted run's (steps redone after a checkpoint replace, never duplicate).

`make test` runs 2 rounds; `soak/soak_faults.py` runs the same code for 10 rounds.
"""

from __future__ import annotations

import os
import pathlib
import random
import signal
import time

import pytest

from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    clean_series,
    context_tarball,
    wait_for_experiment,
    wait_until,
)

CONFIG = """
name: faults
entrypoint: python3 train.py
max_restarts: 100
hyperparameters:
  increment_by: {type: int, minval: 1, maxval: 8}
searcher: {name: random, metric: x, smaller_is_better: false, max_trials: 4,
           max_length: {batches: 100}, max_concurrent_trials: 2}
reproducibility: {experiment_seed: 7}
environment:
  environment_variables: ["STEP_SLEEP=0.03"]
"""


def _running_pids(master: MasterProcess) -> list[int]:
    return [
        row["pid"]
        for row in master.db_rows(
            "SELECT pid FROM allocations WHERE end_time IS NULL AND pid IS NOT NULL"
        )
    ]


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def run_fault_rounds(root: pathlib.Path, rounds: int, seed: int, log=lambda message: None) -> dict:
    """Run a search, inject `rounds` faults, check the outcome; returns a summary dict."""
    rng = random.Random(seed)
    faults: list[str] = []
    with MasterProcess(root, cpu_slots=2) as master:
        exp_id = master.create_experiment(
            CONFIG, context_tarball({"train.py": CHECKPOINTING_SCRIPT})
        )
        for number in range(rounds):
            experiment = master.session.get(f"/experiments/{exp_id}")["experiment"]
            if experiment["state"] not in ("ACTIVE", "PAUSED"):
                faults.append(f"round {number}: experiment already {experiment['state']}")
                break
            wait_until(lambda: _running_pids(master), 120, "a running trial")
            # A random moment within a trial's ~3 s of training.
            pause = rng.uniform(0.3, 2.5)
            time.sleep(pause)
            if rng.random() < 0.5:
                pids = _running_pids(master)
                victim = rng.choice(sorted(pids)) if pids else None
                killed = victim is not None and _kill(victim)
                faults.append(
                    f"round {number}: SIGKILL trial process {victim} "
                    f"({'killed' if killed else 'already gone'}) after {pause:.2f}s"
                )
            else:
                master.kill()
                master.restart()
                faults.append(f"round {number}: SIGKILL master after {pause:.2f}s, restarted")
            log(faults[-1])
        final = wait_for_experiment(master, exp_id, timeout=600)
        trials = master.trials(exp_id)
        mismatches = []
        for trial in trials:
            expected = clean_series(trial["hparams"]["increment_by"])
            for group in ("training", "validation"):
                stored = master.series(trial["id"], group)
                if stored != expected[group]:
                    mismatches.append(
                        f"trial {trial['id']} {group}: stored {stored}, "
                        f"a clean run stores {expected[group]}"
                    )
        integrity = master.db_rows("PRAGMA integrity_check")[0]["integrity_check"]
    return {
        "state": final["state"],
        "trials": len(trials),
        "faults": faults,
        "mismatches": mismatches,
        "integrity": integrity,
        "restarts": sum(t["restarts"] for t in trials),
    }


@pytest.mark.slow
def test_random_kills_of_trials_and_master_lose_and_duplicate_nothing(
    tmp_path: pathlib.Path,
) -> None:
    summary = run_fault_rounds(tmp_path / "root", rounds=2, seed=20261122)
    assert summary["state"] == "COMPLETED", summary
    assert summary["trials"] == 4, summary
    assert summary["integrity"] == "ok", summary
    assert not summary["mismatches"], "\n".join(summary["mismatches"] + summary["faults"])
