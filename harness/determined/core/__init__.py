"""Determined's Core API: `det.core.init()` and the contexts it builds (see docs/core-api.md)."""

from determined.core._checkpoint import CheckpointContext, DownloadMode, DummyCheckpointContext

# _dummy_init: the harness's own off-cluster contexts (experimental._local, pytorch._load).
from determined.core._context import Context, ExperimentalCoreContext, init
from determined.core._context import _dummy_init as _dummy_init
from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._preempt import DummyPreemptContext, PreemptContext, PreemptMode
from determined.core._profiler import DummyProfilerContext, ProfilerContext
from determined.core._searcher import (
    DummySearcherContext,
    DummySearcherOperation,
    SearcherContext,
    SearcherContextMissing,
    SearcherMode,
    SearcherOperation,
    Unit,
)
from determined.core._tensorboard import TensorboardMode
from determined.core._train import DummyTrainContext, EarlyExitReason, TrainContext

__all__ = [
    "CheckpointContext",
    "Context",
    "DistributedContext",
    "DownloadMode",
    "DummyCheckpointContext",
    "DummyDistributedContext",
    "DummyPreemptContext",
    "DummyProfilerContext",
    "DummySearcherContext",
    "DummySearcherOperation",
    "DummyTrainContext",
    "EarlyExitReason",
    "ExperimentalCoreContext",
    "PreemptContext",
    "PreemptMode",
    "ProfilerContext",
    "SearcherContext",
    "SearcherContextMissing",
    "SearcherMode",
    "SearcherOperation",
    "TensorboardMode",
    "TrainContext",
    "Unit",
    "init",
]
