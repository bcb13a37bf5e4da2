"""Issue 26, row 14: writing a TensorBoard's log directory streams the stored reports.

Before, a refresh read every new report of the board's trials as one JSON text, decoded it all,
grouped it and then wrote it (an experiment of 10k reports plus one of 200k metrics took the
master from 139 to 775 MiB). Now the reports are read in pages (keyset on the report id) and
written page by page: the peak of memory traced while the whole experiment is written stays
under a bound set by the page size, far below what the reports take together, and every scalar
is in the event files (read back with TensorBoard's own loader).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from master_lite.store import Store
from master_lite.tensorboards._logdir import SCALARS_PER_EVENT, TrialLogdir, write_new_reports
from tests._support import child_env

pytest.importorskip("tensorboard")

PAGE_BYTES = 16 * 1024
PAGE_REPORTS = 200
REPORTS = 3000
METRICS_PER_REPORT = 20
BIG_REPORT_METRICS = 2 * SCALARS_PER_EVENT + 7  # several events of one step


def _store(tmp_path: Path) -> tuple[Store, list[int]]:
    store = Store(tmp_path / "master.db")
    exp_id = store.insert("experiments", name="big", state="COMPLETED", config={}, start_time=1.0)
    trial_ids = [
        store.insert(
            "trials",
            experiment_id=exp_id,
            request_id=index,
            state="COMPLETED",
            hparams={},
            seed=index,
            start_time=1.0,
        )
        for index in (1, 2)
    ]
    rows = [
        {
            "trial_id": trial_ids[step % 2],
            "trial_run_id": 1,
            "group": "training",
            "steps_completed": step,
            "metrics": {f"metric_{k:03d}": step + k / 1000 for k in range(METRICS_PER_REPORT)},
            "report_time": 1000.0 + step,
        }
        for step in range(1, REPORTS + 1)
    ]
    for start in range(0, len(rows), 500):
        store.insert_metrics(rows[start : start + 500])
    return store, trial_ids


def _events(path: Path):
    """The events of a TFRecord event file (length, its CRC, the Event proto, its CRC), parsed
    with TensorBoard's own proto (its loader would import TensorFlow, which takes long)."""
    from tensorboard.compat.proto import event_pb2

    data = path.read_bytes()
    position = 0
    while position < len(data):
        (length,) = struct.unpack("<Q", data[position : position + 8])
        event = event_pb2.Event()
        event.ParseFromString(data[position + 12 : position + 12 + length])
        yield event
        position += 12 + length + 4


def _scalars(run_dir: Path) -> dict[tuple[str, int], float]:
    """(tag, step) -> value of every scalar in the run's event files."""
    found: dict[tuple[str, int], float] = {}
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in _events(path):
            for value in event.summary.value:
                found[(value.tag, event.step)] = value.simple_value
    return found


def test_a_large_experiment_is_written_page_by_page_and_completely(tmp_path):
    store, trial_ids = _store(tmp_path)
    try:
        total_text = store.scalar("SELECT SUM(length(metrics)) FROM metrics")
        last_stored = store.scalar("SELECT MAX(id) FROM metrics")
        # Warm: TensorBoard's modules are imported and a writer ran (one report, elsewhere).
        warm = {t: TrialLogdir(tmp_path / "warm" / f"trial_{t}", None) for t in trial_ids}
        write_new_reports(store, warm, last_stored - 1)
        for run in warm.values():
            run.close()

        logs = tmp_path / "logs"
        runs = {t: TrialLogdir(logs / f"trial_{t}", None) for t in trial_ids}
        tracemalloc.start()
        try:
            last_id = write_new_reports(
                store, runs, 0, page_reports=PAGE_REPORTS, page_bytes=PAGE_BYTES
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # All the reports' metrics text is many pages (reading it at once, decoded, took
        # several MB); what was held at any time is a few pages' worth.
        assert total_text > 64 * PAGE_BYTES
        assert peak < 16 * PAGE_BYTES, (peak, total_text)
        assert last_id == last_stored

        # A later refresh writes only what is new: one report of thousands of metrics (one
        # row, written as several events of its step), then nothing.
        store.insert_metrics(
            [
                {
                    "trial_id": trial_ids[0],
                    "trial_run_id": 1,
                    "group": "validation",
                    "steps_completed": REPORTS,
                    "metrics": {f"m{k:06d}": float(k) for k in range(BIG_REPORT_METRICS)},
                    "report_time": 5000.0,
                }
            ]
        )
        assert write_new_reports(store, runs, last_id) == last_id + 1
        assert write_new_reports(store, runs, last_id + 1) == last_id + 1
        for run in runs.values():
            run.close()

        written = {
            **_scalars(logs / f"trial_{trial_ids[0]}"),
            **_scalars(logs / f"trial_{trial_ids[1]}"),
        }
        expected = {
            (f"training/metric_{k:03d}", step): step + k / 1000
            for step in range(1, REPORTS + 1)
            for k in range(METRICS_PER_REPORT)
        }
        expected.update(
            {(f"validation/m{k:06d}", REPORTS): float(k) for k in range(BIG_REPORT_METRICS)}
        )
        assert written.keys() == expected.keys()
        assert all(written[key] == pytest.approx(value) for key, value in expected.items())
    finally:
        store.close()


def test_writing_a_run_directory_imports_no_tensorflow(tmp_path):
    # TensorBoard's EventFileWriter opens its file through tf.io.gfile, which imports
    # TensorFlow where it is installed: half a GiB of the master's memory for good (most of
    # the 139 -> 775 MiB of issue 26 row 14). The run directory's own writer needs none.
    script = f"""
import sys
from pathlib import Path
from master_lite.tensorboards._logdir import TrialLogdir
run = TrialLogdir(Path({str(tmp_path / "run")!r}), None)
run.append_reports([{{"id": 1, "group": "training", "steps_completed": 3,
                      "metrics": {{"loss": 0.5}}, "report_time": 1.0}}])
run.close()
print("tensorflow" in sys.modules)
"""
    answer = subprocess.run(
        [sys.executable, "-c", script], env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == "False"
    assert _scalars(tmp_path / "run") == {("training/loss", 3): 0.5}
