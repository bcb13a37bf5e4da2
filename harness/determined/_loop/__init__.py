"""The one managed training loop behind every Trial API (Keras, Estimator, PyTorch).

Framework-neutral: it never imports TensorFlow or torch. The rules live here once —

* lengths -> batches (`Lengths`, over `determined.common.expconf`, which the master shares:
  `{records: n}` is `max(n // global_batch_size, 1)` batches, epochs via records_per_epoch or
  the data loader);
* chunk planning from searcher operations and the validation / checkpoint / report periods
  (`ChunkPlan`, `Every`, `At`, `Never`);
* preemption, stop requests, the report and checkpoint policy, and the searcher-metric lookup
  (`TrainingLoop`, `searcher_metric_value`, `CheckpointPolicy`);
* the table and summary a local (off-cluster) run prints (`format_table`, `print_local_summary`).

A framework is an adapter: a subclass of `TrainingLoop` that trains N batches, validates, saves
and restores (see `determined._loop._loop`).
"""

from determined._loop._lengths import Lengths
from determined._loop._loop import PROGRESS_INTERVAL_S, TrainingLoop
from determined._loop._operations import ChunkEnd, LocalOperation, LoopMode
from determined._loop._periods import NEVER, At, ChunkPlan, Every, Never, Period, every
from determined._loop._reports import (
    LoopResult,
    Report,
    format_table,
    print_local_summary,
    print_validation,
)
from determined._loop._searcher_metric import (
    CheckpointPolicy,
    MissingSearcherMetric,
    is_better,
    searcher_metric_value,
)

__all__ = [
    "NEVER",
    "PROGRESS_INTERVAL_S",
    "At",
    "CheckpointPolicy",
    "ChunkEnd",
    "ChunkPlan",
    "Every",
    "Lengths",
    "LocalOperation",
    "LoopMode",
    "LoopResult",
    "MissingSearcherMetric",
    "Never",
    "Period",
    "Report",
    "TrainingLoop",
    "every",
    "format_table",
    "is_better",
    "print_local_summary",
    "print_validation",
    "searcher_metric_value",
]
