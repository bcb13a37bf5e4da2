"""Fault soak (`make soak`): 10 rounds of random SIGKILLs (trial processes and the master) during
a search, fixed seed — the long version of tests/reliability/test_faults.py (which runs 2).

Checks (exit status 1 when one fails): the experiment completes, every trial's stored metrics
equal an uninterrupted run's, SQLite's integrity check passes. Results go to bench/RESULTS.md
("Soak: faults").
Run: PYTHONPATH=harness:. python soak/soak_faults.py [--rounds 10] [--seed 20261122]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from _common import record  # noqa: E402  (also puts the repo root and harness on sys.path)

from tests.reliability.test_faults import run_fault_rounds  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-faults-") as tmp:
        summary = run_fault_rounds(
            pathlib.Path(tmp) / "root",
            args.rounds,
            args.seed,
            log=lambda line: print(line, flush=True),
        )
    failures = list(summary["mismatches"])
    if summary["state"] != "COMPLETED":
        failures.append(f"experiment ended {summary['state']}")
    if summary["integrity"] != "ok":
        failures.append(f"SQLite integrity check: {summary['integrity']}")
    kills = summary["faults"]
    text = (
        f"{args.rounds} rounds, seed {args.seed}: {sum('trial process' in f for f in kills)} "
        f"trial-process kills, {sum('master' in f for f in kills)} master kills; experiment "
        f"{summary['state']}, {summary['trials']} trials, {summary['restarts']} trial "
        f"restarts, integrity check {summary['integrity']}, "
        f"{len(summary['mismatches'])} trials whose stored metrics differ from a clean run."
    )
    print(text)
    for failure in failures:
        print("FAIL:", failure)
    record(
        "Soak: faults (soak/soak_faults.py)",
        "Targets: every experiment completes; stored metrics equal a clean run's.\n\n"
        f"{text}\n\nResult: {'PASS' if not failures else 'FAIL — ' + '; '.join(failures[:5])}",
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
