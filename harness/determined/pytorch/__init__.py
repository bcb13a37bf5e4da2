"""Determined's PyTorch APIs: `PyTorchTrial` + `Trainer`, data loading, reducers, callbacks.

Every public name of Determined 0.38's `determined.pytorch`, and the older ones examples of
0.13-0.26 import (`ClipGradsL2Norm`, `ClipGradsL2Value`, `reset_parameters` and the
batch samplers at the top level). `TorchData` is the type of a batch: a tensor, a sequence of
tensors or a dict of them. Importing this package imports torch; `import determined` alone
never does.
"""

from determined.pytorch import samplers
from determined.pytorch._callback import ClipGradsL2Norm, ClipGradsL2Value, PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._data import (
    DataLoader,
    TorchData,
    adapt_batch_sampler,
    data_length,
    to_device,
)
from determined.pytorch._experimental import PyTorchExperimentalContext
from determined.pytorch._init import init
from determined.pytorch._load import CheckpointLoadContext, load_trial_from_checkpoint_path
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import MetricReducer, Reducer
from determined.pytorch._trainer import Trainer
from determined.pytorch._trial import LegacyTrial, PyTorchTrial, reset_parameters
from determined.pytorch._units import Batch, Epoch, TrainUnit
from determined.pytorch.samplers import (
    DistributedBatchSampler,
    RepeatBatchSampler,
    ReproducibleShuffleSampler,
    SkipBatchSampler,
)

__all__ = [
    "Batch",
    "CheckpointLoadContext",
    "ClipGradsL2Norm",
    "ClipGradsL2Value",
    "DataLoader",
    "DistributedBatchSampler",
    "Epoch",
    "LRScheduler",
    "LegacyTrial",
    "MetricReducer",
    "PyTorchCallback",
    "PyTorchExperimentalContext",
    "PyTorchTrial",
    "PyTorchTrialContext",
    "Reducer",
    "RepeatBatchSampler",
    "ReproducibleShuffleSampler",
    "SkipBatchSampler",
    "TorchData",
    "TrainUnit",
    "Trainer",
    "adapt_batch_sampler",
    "data_length",
    "init",
    "load_trial_from_checkpoint_path",
    "reset_parameters",
    "samplers",
    "to_device",
]
