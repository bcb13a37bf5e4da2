"""The Core API off the master: dummy contexts, the tutorial stages in a plain Python process."""

import json
import logging
import os
import pathlib
import subprocess
import sys

import pytest

import determined as det
from determined import core

ROOT = pathlib.Path(__file__).resolve().parents[3]
STAGES = ROOT / "examples" / "core_api"


def clean_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return env


@pytest.fixture(autouse=True)
def off_the_master(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("DET_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def run_stage(name, tmp_path):
    return subprocess.run(
        [sys.executable, str(STAGES / name)],
        cwd=STAGES,
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_stage_0_prints_x_up_to_100(tmp_path):
    result = run_stage("0_start.py", tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == [f"x is now {i}" for i in range(1, 101)]


@pytest.mark.slow
def test_stage_1_runs_off_the_master_and_logs_every_report(tmp_path):
    result = run_stage("1_metrics.py", tmp_path)
    assert result.returncode == 0, result.stderr
    log = result.stderr
    for level in ("DEBUG", "INFO", "WARNING", "ERROR"):
        assert f"{level}: [" in log and f"{level.lower()}-level message" in log
    reported = [line for line in log.splitlines() if "report_training_metrics" in line]
    assert [line.split("report_training_metrics")[1] for line in reported] == [
        f"(steps_completed={s}, metrics={{'x': {s}}})" for s in range(10, 101, 10)
    ]
    assert "report_validation_metrics(steps_completed=100, metrics={'x': 100})" in log


@pytest.mark.parametrize("stage", ["2_checkpoints.py", "3_hpsearch.py"])
def test_on_cluster_stages_explain_themselves_off_the_master(tmp_path, stage):
    result = run_stage(stage, tmp_path)
    assert result.returncode != 0
    assert "only runs on the master" in result.stderr
    assert "det e create" in result.stderr


def test_dummy_contexts_off_the_master(tmp_path):
    with det.core.init(checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        assert ctx.info is None
        assert isinstance(ctx.train, core.DummyTrainContext)
        assert isinstance(ctx.preempt, core.DummyPreemptContext)
        assert isinstance(ctx.checkpoint, core.DummyCheckpointContext)
        assert isinstance(ctx.searcher, core.DummySearcherContext)
        assert isinstance(ctx.distributed, core.DummyDistributedContext)
        assert ctx.distributed.rank == 0 and ctx.distributed.size == 1
        assert ctx.preempt.should_preempt() is False
        assert ctx.train.get_experiment_best_validation() is None
        assert ctx.train.get_tensorboard_path() is None
        ops = []
        for op in ctx.searcher.operations():
            ops.append(op.length)
            op.report_progress(1)
            op.report_completed(0.5)
        assert ops == [1]
        assert ctx.searcher.get_configured_units() is core.Unit.EPOCHS
        with pytest.raises(ValueError):
            ctx.alert(title="t")


def test_checkpoint_layout_and_round_trip(tmp_path):
    base = tmp_path / "ckpts"
    with det.core.init(checkpoint_storage=str(base)) as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 10, "note": "a"}) as (path, uuid):
            (path / "state").write_text("10,10,1")
            (path / "sub").mkdir()
            (path / "sub" / "w.bin").write_bytes(b"\x00" * 5)
        assert path == base / uuid
        assert sorted(p.name for p in path.iterdir()) == ["metadata.json", "state", "sub"]
        assert json.loads((path / "metadata.json").read_text()) == {
            "steps_completed": 10,
            "note": "a",
        }
        with ctx.checkpoint.restore_path(uuid) as restored:
            assert (restored / "state").read_text() == "10,10,1"
        # download with a selector fetches only what it selects
        ctx.checkpoint.download(uuid, tmp_path / "dl", selector=lambda p: p.startswith("sub"))
        assert sorted(
            str(p.relative_to(tmp_path / "dl")) for p in (tmp_path / "dl").rglob("*")
        ) == ["sub", "sub/w.bin"]
        with pytest.raises(NotImplementedError):
            ctx.checkpoint.get_metadata(uuid)
        ctx.checkpoint.delete(uuid)
        assert not path.exists()


def test_upload_writes_metadata_and_copies_contents(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.txt").write_text("weights")
    (src / "skip.log").write_text("noise")
    with det.core.init(checkpoint_storage=f"file://{tmp_path / 'store'}") as ctx:
        uuid = ctx.checkpoint.upload(
            src, {"steps_completed": 3}, selector=lambda p: not p.endswith(".log")
        )
        stored = tmp_path / "store" / uuid
        assert sorted(p.name for p in stored.iterdir()) == ["metadata.json", "model.txt"]
        assert json.loads((stored / "metadata.json").read_text()) == {"steps_completed": 3}
        # the dummy context does not insist on steps_completed (only the master does)
        uuid2 = ctx.checkpoint.upload(src)
        assert json.loads((tmp_path / "store" / uuid2 / "metadata.json").read_text()) == {}
        with pytest.raises(ValueError, match="shard=True"):
            ctx.checkpoint.upload(None)
        # sharded with a single rank behaves like a normal upload
        uuid3 = ctx.checkpoint.upload(src, {"steps_completed": 4}, shard=True)
        assert (tmp_path / "store" / uuid3 / "model.txt").read_text() == "weights"


def test_default_storage_is_the_user_data_dir(tmp_path):
    with det.core.init() as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
            (path / "f").write_text("x")
    assert path == tmp_path / "xdg" / "determined" / uuid


def test_checkpoint_storage_override_forms(tmp_path):
    with pytest.raises(ValueError, match="shared_fs"):
        det.core.init(checkpoint_storage={"type": "shared_fs", "host_path": str(tmp_path)})
    with pytest.raises(ValueError, match="no bucket"):
        det.core.init(checkpoint_storage="gs:///prefix")
    with pytest.raises(ValueError, match="no bucket"):
        det.core.init(checkpoint_storage="s3:///prefix")
    with pytest.raises(ValueError, match="unknown scheme"):
        det.core.init(checkpoint_storage="ftp://host/x")
    ctx = det.core.init(
        checkpoint_storage={"type": "directory", "container_path": str(tmp_path / "d")}
    )
    with ctx:
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, _):
            pass
    assert path.parent == tmp_path / "d"


def test_validation_metric_rules(caplog):
    with det.core.init() as ctx:
        with pytest.raises(RuntimeError, match="'loss' is None"):
            ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": None})
        # None is only rejected for validation
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": None})
        with caplog.at_level(logging.INFO, logger="determined.core"):
            ctx.train.report_validation_metrics(
                steps_completed=2, metrics={"raw": b"x", "acc": 0.5}
            )
        assert "dropping validation metric 'raw'" in caplog.text
        assert "report_validation_metrics(steps_completed=2, metrics={'acc': 0.5})" in caplog.text
        with pytest.raises(ValueError, match="without '.'"):
            ctx.train.report_metrics("my.group", 1, {"a": 1})
        with pytest.raises(ValueError, match="non-empty"):
            ctx.train.report_metrics("", 1, {"a": 1})
        with pytest.raises(TypeError, match="steps_completed must be an integer"):
            ctx.train.report_training_metrics(steps_completed=1.5, metrics={})
        ctx.train.report_metrics("custom", 1, {"a": 1})
        ctx.train.report_progress(3.0)  # the dummy does no range check (Determined's behaviour)


def test_should_preempt_before_start_raises():
    ctx = det.core.init()
    with pytest.raises(RuntimeError, match="before the core context started"):
        ctx.preempt.should_preempt()
    with ctx:
        assert ctx.preempt.should_preempt() is False


def test_enums_keep_determined_values():
    assert core.SearcherMode.ChiefOnly.value == "CHEIF_ONLY"
    assert core.SearcherMode.WorkersAskChief.value == "WORKERS_ASK_CHIEF"
    assert core.PreemptMode.ChiefOnly.value == "CHIEF_ONLY"
    assert core.PreemptMode.WorkersAskMaster.value == "WORKERS_ASK_MASTER"
    assert core.EarlyExitReason.INVALID_HP.value == "EXITED_REASON_INVALID_HP"
    assert core.DownloadMode.NoSharedDownload.value == "NO_SHARED_DOWNLOAD"
    assert {m.name for m in core.TensorboardMode} == {"AUTO", "MANUAL"}


def test_core_exports_exactly_the_documented_names():
    assert set(core.__all__) == {
        "init",
        "Context",
        "DistributedContext",
        "DummyDistributedContext",
        "CheckpointContext",
        "DummyCheckpointContext",
        "DownloadMode",
        "TrainContext",
        "DummyTrainContext",
        "EarlyExitReason",
        "SearcherContext",
        "DummySearcherContext",
        "SearcherOperation",
        "DummySearcherOperation",
        "SearcherMode",
        "SearcherContextMissing",
        "Unit",
        "PreemptContext",
        "DummyPreemptContext",
        "PreemptMode",
        "ProfilerContext",
        "DummyProfilerContext",
        "ExperimentalCoreContext",
        "TensorboardMode",
    }
    for name in core.__all__:
        assert getattr(core, name) is not None


def test_searcher_op_must_be_completed():
    with det.core.init() as ctx:
        with pytest.raises(RuntimeError, match="report_completed"):
            for _ in ctx.searcher.operations():
                pass
        for op in ctx.searcher.operations():
            op.report_completed(1.0)
            with pytest.raises(RuntimeError, match="only be called once"):
                op.report_completed(1.0)
            with pytest.raises(RuntimeError, match="must equal op.length"):
                op.report_progress(0.5)


def test_invalid_hp_exits_cleanly(tmp_path):
    script = (
        "import determined as det\nwith det.core.init():\n    raise det.InvalidHP('lr "
        "too big')\nprint('unreachable')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "unreachable" not in result.stdout


def test_profiler_arguments_are_validated():
    with det.core.init() as ctx:
        with pytest.raises(ValueError, match="sampling_interval"):
            ctx.profiler.on(sampling_interval=0.01)
        with pytest.raises(ValueError, match="samples_per_report"):
            ctx.profiler.on(samples_per_report=0)
        ctx.profiler.on()
        ctx.profiler.off()
        ctx.profiler.off()


def test_import_is_framework_free(tmp_path):
    code = (
        "import sys, determined, determined.core, determined.generic; "
        "print(sorted(m for m in ('torch', 'tensorflow', 'jsonschema', 'requests') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


NULL_CONTEXTS = [
    ("distributed", core.DummyDistributedContext, core.DistributedContext),
    ("checkpoint", core.DummyCheckpointContext, core.CheckpointContext),
    ("preempt", core.DummyPreemptContext, core.PreemptContext),
    ("train", core.DummyTrainContext, core.TrainContext),
    ("searcher", core.DummySearcherContext, core.SearcherContext),
    ("profiler", core.DummyProfilerContext, core.ProfilerContext),
]


@pytest.mark.parametrize(
    "attribute, dummy, real", NULL_CONTEXTS, ids=[a for a, _, _ in NULL_CONTEXTS]
)
def test_null_contexts_are_the_real_contexts(tmp_path, attribute, dummy, real):
    """Off the master, code checking `isinstance(ctx.preempt, core.PreemptContext)` still works."""
    assert issubclass(dummy, real)
    with det.core.init(checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        assert type(getattr(ctx, attribute)) is dummy
        assert isinstance(getattr(ctx, attribute), real)


def test_null_searcher_operations_and_the_missing_searcher_are_the_real_ones():
    assert issubclass(core.DummySearcherOperation, core.SearcherOperation)
    with det.core.init() as ctx:
        for op in ctx.searcher.operations():
            assert isinstance(op, core.SearcherOperation)
            op.report_completed(0.5)
    missing = core.SearcherContextMissing()
    assert isinstance(missing, core.SearcherContext)
    with pytest.raises(ValueError, match="only in trials started by the master"):
        missing.operations()


class RecordingDistributed:
    """A rank of a multi-process job whose broadcasts return what the chief would send."""

    def __init__(self, rank, from_chief=()):
        self.rank = rank
        self.from_chief = list(from_chief)
        self.broadcasts = []

    def broadcast(self, stuff):
        self.broadcasts.append(stuff)
        return stuff if self.rank == 0 else self.from_chief.pop(0)


def test_null_contexts_keep_the_rank_rules_and_synchronization():
    chief = RecordingDistributed(rank=0)
    preempt = core.DummyPreemptContext(chief)
    preempt.start()
    assert preempt.should_preempt() is False
    assert chief.broadcasts == [False]  # WorkersAskChief: the chief's answer goes to the workers

    worker = RecordingDistributed(rank=1, from_chief=[1, None])
    lengths = []
    for op in core.DummySearcherContext(worker).operations():
        lengths.append(op.length)
        with pytest.raises(RuntimeError, match="only be called by the chief"):
            op.report_completed(0.5)
    assert lengths == [1] and worker.broadcasts == [None, None]

    only_chief = core.DummyPreemptContext(RecordingDistributed(rank=1), core.PreemptMode.ChiefOnly)
    only_chief.start()
    with pytest.raises(RuntimeError, match="only the chief"):
        only_chief.should_preempt()
    with pytest.raises(RuntimeError, match="only the chief may iterate"):
        next(
            core.DummySearcherContext(RecordingDistributed(rank=1)).operations(
                core.SearcherMode.ChiefOnly
            )
        )
