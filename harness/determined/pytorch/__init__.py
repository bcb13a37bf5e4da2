"""Determined's PyTorch APIs: `PyTorchTrial` + `Trainer`, data loading, reducers, callbacks.

Importing this package imports torch; `import determined` alone never does.
"""

from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._data import (
    DataLoader,
    DistributedBatchSampler,
    RepeatBatchSampler,
    ReproducibleShuffleSampler,
    SkipBatchSampler,
    adapt_batch_sampler,
    data_length,
    to_device,
)
from determined.pytorch._init import init
from determined.pytorch._load import load_trial_from_checkpoint_path
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import MetricReducer, Reducer
from determined.pytorch._trainer import Trainer
from determined.pytorch._trial import LegacyTrial, PyTorchTrial
from determined.pytorch._units import Batch, Epoch, TrainUnit

__all__ = [
    "Batch",
    "DataLoader",
    "DistributedBatchSampler",
    "Epoch",
    "LRScheduler",
    "LegacyTrial",
    "MetricReducer",
    "PyTorchCallback",
    "PyTorchTrial",
    "PyTorchTrialContext",
    "Reducer",
    "RepeatBatchSampler",
    "ReproducibleShuffleSampler",
    "SkipBatchSampler",
    "TrainUnit",
    "Trainer",
    "adapt_batch_sampler",
    "data_length",
    "init",
    "load_trial_from_checkpoint_path",
    "to_device",
]
