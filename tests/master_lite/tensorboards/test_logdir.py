"""A trial's run directory of a TensorBoard: its own event files are copied record by record."""

from __future__ import annotations

from pathlib import Path

from master_lite.tensorboards._logdir import TrialLogdir, complete_records_end


def event_file(directory: Path, values: list[tuple[int, float]]) -> Path:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(directory))
    for step, value in values:
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="x", simple_value=value)]
        )
        writer.add_event(event_pb2.Event(wall_time=1.0, step=step, summary=summary))
    writer.close()
    [path] = directory.glob("events.out.tfevents.*")
    return path


def read_steps(path: Path) -> list[int]:
    """Steps of the scalar events in `path`, read by TensorBoard's own loader."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    return [event.step for event in EventFileLoader(str(path)).Load() if event.summary.value]


def test_a_half_written_record_is_copied_only_once_it_is_complete(tmp_path):
    complete = event_file(tmp_path / "written", [(1, 0.5), (2, 0.25), (3, 0.125)])
    data = complete.read_bytes()
    own = tmp_path / "own"
    own.mkdir()
    source = own / complete.name
    # The trial (or the harness copying it) is in the middle of writing the last record.
    source.write_bytes(data[:-7])
    assert complete_records_end(source, 0) < len(data) - 7

    run = TrialLogdir(tmp_path / "run", own)
    run.copy_own_files()
    copy = tmp_path / "run" / complete.name
    assert read_steps(copy) == [1, 2]
    assert copy.read_bytes() == data[: complete_records_end(source, 0)]

    source.write_bytes(data)
    run.copy_own_files()
    assert copy.read_bytes() == data
    assert read_steps(copy) == [1, 2, 3]
    assert run.has_data()


def test_reports_become_scalars_of_their_group_and_are_written_once(tmp_path):
    run = TrialLogdir(tmp_path / "run", None)
    reports = [
        {"id": 1, "group": "training", "steps_completed": 5, "metrics": {"loss": 0.5, "note": "x"}},
        {"id": 2, "group": "validation", "steps_completed": 5, "metrics": {"acc": 0.75}},
    ]
    run.append_reports(reports)
    run.append_reports(reports)  # a refresh that read them again
    run.close()
    [path] = (tmp_path / "run").glob("events.out.tfevents.*")
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    tags = [
        (event.step, value.tag)
        for event in EventFileLoader(str(path)).Load()
        for value in event.summary.value
    ]
    # Non-numeric values are left out.
    assert tags == [(5, "training/loss"), (5, "validation/acc")]
