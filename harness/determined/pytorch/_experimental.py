"""`context.experimental` of a `PyTorchTrialContext`: opt-in behaviours (Determined's names)."""

from __future__ import annotations

import logging
from typing import Any

import torch

logger = logging.getLogger("determined.pytorch")


class PyTorchExperimentalContext:
    """Opt-in switches of a `PyTorchTrialContext`, reached as `context.experimental`.

    Call them in the trial's `__init__`, before wrapping models (`use_amp`) or building data
    loaders.
    """

    def __init__(self, parent: Any) -> None:
        self._parent = parent
        self._auto_amp = False
        self._data_repro_checks_disabled = False
        self._auto_to_device = True

    def use_amp(self) -> None:
        """Automatic mixed precision with a default gradient scaler, done for you.

        Models wrapped afterwards run their forward pass under `torch.autocast`; `backward`
        scales the loss and `step_optimizer` steps through the scaler (and unscales before
        `clip_grads`). Do not also call `wrap_scaler`. On a CPU-only trial it does nothing but
        log so (like Determined, where torch AMP is for CUDA devices).
        """
        device = self._parent.device
        if device.type != "cuda":
            logger.warning(
                "use_amp: automatic mixed precision needs a CUDA device; ignored on %s", device
            )
            return
        self._parent.wrap_scaler(torch.amp.GradScaler("cuda"))
        self._auto_amp = True

    def disable_dataset_reproducibility_checks(self) -> None:
        """Allow any `torch.utils.data.DataLoader` from `build_*_data_loader`, without a warning.

        Such a loader is neither sharded across ranks nor skipped on resume by Determined: that is
        then yours to do (the classes in `determined.pytorch.samplers` help).
        """
        self._data_repro_checks_disabled = True
        logger.info("disabled dataset reproducibility checks")

    def disable_auto_to_device(self) -> None:
        """Stop the training loop from moving each batch to `context.device`.

        `train_batch` / `evaluate_batch` then get the batch as the data loader made it; move
        what you need with `context.to_device(...)`.
        """
        self._auto_to_device = False
