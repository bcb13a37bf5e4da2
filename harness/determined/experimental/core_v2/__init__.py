"""`det.experimental.core_v2`: the Core API for a run that trains where it is — a notebook's
kernel — tracked by the master like any trial (Determined's unmanaged mode).

    from determined.experimental import core_v2
    core_v2.init(config=core_v2.Config(name="mnist", hparams={"lr": 0.01},
                                       external_experiment_id="mnist", external_trial_id="1"))
    for step in range(1, 101):
        core_v2.train.report_training_metrics(step, {"loss": 1 / step})
    core_v2.close()

docs/results.md ("Tracking a run that trains in the kernel") says how runs end and resume.
"""

from __future__ import annotations

from typing import Any

from determined.core import DistributedContext, PreemptMode, TensorboardMode
from determined.experimental.core_v2._config import Config, DefaultConfig, UnmanagedConfig
from determined.experimental.core_v2._core_v2 import (
    close,
    close_run,
    current_run,
    init,
    init_context,
    url_reverse_webui_exp_view,
)
from determined.experimental.core_v2._run import RunEnded

# The singletons `init` sets and `close` clears.
train: Any = None
checkpoint: Any = None
distributed: Any = None
preempt: Any = None
searcher: Any = None
info: Any = None

__all__ = [
    "Config",
    "DefaultConfig",
    "DistributedContext",
    "PreemptMode",
    "RunEnded",
    "TensorboardMode",
    "UnmanagedConfig",
    "checkpoint",
    "close",
    "close_run",
    "current_run",
    "distributed",
    "info",
    "init",
    "init_context",
    "preempt",
    "searcher",
    "train",
    "url_reverse_webui_exp_view",
]
