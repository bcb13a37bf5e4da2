"""`PyTorchTrialContext`'s answers about the trial: hyperparameters, config, batch sizes, ids,
where the training loop is, stop requests, TensorBoard.

A base class of `determined.pytorch.PyTorchTrialContext` (which keeps the construction and the
registering and stepping of the training objects); nothing here is public by itself.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any

logger = logging.getLogger("determined.pytorch")


class TrialInfo:
    """The getters and flags of `PyTorchTrialContext` that only read or set its state."""

    # Set by `PyTorchTrialContext.__init__` (and kept up to date by the training loop); declared
    # here for the type checker.
    distributed: Any
    _core: Any
    _hparams: dict[str, Any] | None
    _exp_conf: dict[str, Any] | None
    _trial_id: int | None
    _experiment_id: int | None
    _trial_seed: int | None
    _steps_completed: int
    _enable_tensorboard_logging: bool
    _stop_requested: bool
    _tensorboard_writer: Any
    _current_batch_idx: int
    _epoch_len: int | None

    # --- facts about the trial --------------------------------------------------------------
    def get_hparams(self) -> dict[str, Any]:
        """The trial's hyperparameters.

        Returns:
            The dict itself, not a copy: on the master the trial's values, elsewhere the `hparams`
            passed to `det.pytorch.init()`.

        Raises:
            ValueError: there are none (no `hparams=` was passed to `det.pytorch.init()`).
        """
        if self._hparams is None:
            raise ValueError(
                "this context has no hyperparameters: pass hparams= to det.pytorch.init()"
            )
        return self._hparams

    def get_hparam(self, name: str) -> Any:
        """One hyperparameter's value.

        Asking for `global_batch_size` logs a warning: use the batch size getters instead.

        Args:
            name: a top-level hyperparameter name (a nested section comes back as a dict).

        Returns:
            Its value.

        Raises:
            ValueError: the context has no hyperparameters, or none called `name`.
        """
        hparams = self.get_hparams()
        if name == "global_batch_size":
            logger.warning(
                "use context.get_per_slot_batch_size() (or get_global_batch_size()) rather than "
                "get_hparam('global_batch_size'): the data each rank loads is the per-slot batch"
            )
        if name not in hparams:
            raise ValueError(f"hyperparameter {name!r} not found; the trial has {sorted(hparams)}")
        return hparams[name]

    def get_experiment_config(self) -> dict[str, Any]:
        """The experiment config.

        Returns:
            The config dict itself, not a copy (the trial's on the master, the `exp_conf` passed to
            `det.pytorch.init()` elsewhere); an empty dict when there is none.
        """
        return self._exp_conf or {}

    def get_data_config(self) -> dict[str, Any]:
        """The `data` section of the experiment config.

        Returns:
            That dict itself, not a copy; an empty dict when the config has no `data`.
        """
        return (self._exp_conf or {}).get("data") or {}

    def _batch_sizes(self) -> tuple[int, int]:
        hparams = self._hparams or {}
        if "global_batch_size" not in hparams:
            raise ValueError(
                "the batch size getters need hyperparameter global_batch_size (an int): add it to "
                "the hparams passed to det.pytorch.init() or to the experiment config's hyperparameters"
            )
        global_batch_size = hparams["global_batch_size"]
        slots = self.distributed.size
        if (
            isinstance(global_batch_size, bool)
            or not isinstance(global_batch_size, int)
            or global_batch_size < slots
        ):
            raise ValueError(
                f"hyperparameter global_batch_size must be an int >= the number of slots ({slots}), "
                f"got {global_batch_size!r}"
            )
        per_slot = global_batch_size // slots
        if per_slot * slots != global_batch_size:
            logger.warning(
                "global_batch_size %d is not divisible by %d slots: the effective global batch size is %d",
                global_batch_size,
                slots,
                per_slot * slots,
            )
        return per_slot * slots, per_slot

    def get_global_batch_size(self) -> int:
        """The number of records in one training step, summed over all processes.

        Hyperparameter `global_batch_size`, rounded down to a multiple of the number of processes
        (`distributed.size`); a warning is logged when it had to be rounded.

        Returns:
            `get_per_slot_batch_size()` times the number of processes.

        Raises:
            ValueError: hyperparameter `global_batch_size` is missing, not an int, or smaller than
                the number of processes.
        """
        return self._batch_sizes()[0]

    def get_per_slot_batch_size(self) -> int:
        """The number of records each process trains on per batch: use it in your data loaders.

        Returns:
            `global_batch_size // distributed.size`.

        Raises:
            ValueError: hyperparameter `global_batch_size` is missing, not an int, or smaller than
                the number of processes.
        """
        return self._batch_sizes()[1]

    def get_trial_id(self) -> int:
        """The id of this trial on the master.

        Returns:
            The trial id.

        Raises:
            ValueError: not running as a trial on the master (local training).
        """
        if self._trial_id is None:
            raise ValueError(
                "get_trial_id(): there is no trial id off the master (local training mode)"
            )
        return self._trial_id

    def get_experiment_id(self) -> int:
        """The id of this trial's experiment on the master.

        Returns:
            The experiment id.

        Raises:
            ValueError: not running as a trial on the master (local training).
        """
        if self._experiment_id is None:
            raise ValueError(
                "get_experiment_id(): there is no experiment id off the master (local training mode)"
            )
        return self._experiment_id

    def get_trial_seed(self) -> int | None:
        """The trial's random seed.

        Returns:
            On the master, the seed the master gave this trial (`det.pytorch.init()` has already
            seeded Python's, NumPy's and torch's random generators with it); None elsewhere.
        """
        return self._trial_seed

    def get_initial_batch(self) -> int:
        """Batches already trained when this process started (from the checkpoint resumed)."""
        return self._steps_completed

    def get_enable_tensorboard_logging(self) -> bool:
        """Whether TensorBoard logging is enabled.

        The flag is only stored: the trainer here writes no TensorBoard metrics by itself, with or
        without it (use `get_tensorboard_writer()` to write your own).

        Returns:
            The `enable_tensorboard_logging` passed to `det.pytorch.init()`, or the value last set
            with `set_enable_tensorboard_logging`.
        """
        return self._enable_tensorboard_logging

    def set_enable_tensorboard_logging(self, enable: bool) -> None:
        """Turn TensorBoard logging on or off (a stored flag; see `get_enable_tensorboard_logging`).

        Args:
            enable: the new value (converted with `bool()`).
        """
        self._enable_tensorboard_logging = bool(enable)

    # --- stopping ------------------------------------------------------------------------
    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask the trainer to stop training early (or withdraw that request).

        The trainer checks after each span of batches it trains between two reports,
        validations or checkpoints (not after every batch); a request on any process stops all
        of them. It then saves a checkpoint and `fit` returns.

        Args:
            stop_requested: True to stop, False to withdraw an earlier request.

        Raises:
            TypeError: `stop_requested` is not a bool.
        """
        if not isinstance(stop_requested, bool):
            raise TypeError(f"set_stop_requested: expected a bool, got {stop_requested!r}")
        self._stop_requested = stop_requested

    def get_stop_requested(self) -> bool:
        """Whether this process asked to stop (see `set_stop_requested`).

        Returns:
            The value last set with `set_stop_requested`; False at first.
        """
        return self._stop_requested

    # --- where the training loop is ---------------------------------------------------------
    def _require_epoch_len(self) -> int:
        if self._epoch_len is None:
            raise RuntimeError("the epoch length is only known while Trainer.fit() runs")
        return self._epoch_len

    def current_train_batch(self) -> int:
        """Where training is, in batches counted from the start of training (not of the epoch).

        Returns:
            During `train_batch`, that batch's `batch_idx`; between batches (validation,
            checkpoints, callbacks after a span of batches) the number of batches trained so far.
        """
        return self._current_batch_idx

    def current_train_epoch(self) -> int:
        """The epoch of `current_train_batch()`, counted from 0.

        Returns:
            `current_train_batch() // ` the number of batches in an epoch of the training data.

        Raises:
            RuntimeError: `Trainer.fit()` has not yet built the training data loader, so the
                epoch length is unknown.
        """
        return self._current_batch_idx // self._require_epoch_len()

    def is_epoch_start(self) -> bool:
        """Whether `current_train_batch()` is the first batch of an epoch.

        Returns:
            True when the batch index is a multiple of the epoch length.

        Raises:
            RuntimeError: `Trainer.fit()` has not yet built the training data loader, so the
                epoch length is unknown.
        """
        return self._current_batch_idx % self._require_epoch_len() == 0

    def is_epoch_end(self) -> bool:
        """Whether `current_train_batch()` is the last batch of an epoch.

        Returns:
            True when the batch index plus one is a multiple of the epoch length.

        Raises:
            RuntimeError: `Trainer.fit()` has not yet built the training data loader, so the
                epoch length is unknown.
        """
        return (self._current_batch_idx + 1) % self._require_epoch_len() == 0

    # --- tensorboard / profiling -------------------------------------------------------------
    def get_tensorboard_path(self) -> pathlib.Path | None:
        """The directory to write TensorBoard event files to.

        Returns:
            On the master, the trial's TensorBoard directory, whose files the chief uploads to
            checkpoint storage after each span of trained batches; None elsewhere.
        """
        return self._core.train.get_tensorboard_path()

    def get_tensorboard_writer(self) -> Any:
        """A `torch.utils.tensorboard.SummaryWriter` for your own TensorBoard data.

        Created on the first call, then the same writer every time.

        Returns:
            A writer into `get_tensorboard_path()`; without that path (off the master), into the
            SummaryWriter's default directory (`./runs/...`).

        Raises:
            ImportError: the `tensorboard` package is not installed.
        """
        if self._tensorboard_writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as e:
                raise ImportError(
                    f"get_tensorboard_writer() needs the tensorboard package ({e}); pip install tensorboard"
                ) from e
            path = self.get_tensorboard_path()
            self._tensorboard_writer = SummaryWriter(None if path is None else str(path))
        return self._tensorboard_writer

    def set_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Not supported: the torch profiler integration is missing here; this only logs a warning.

        Args:
            *args: ignored (Determined passes them to `torch.profiler.profile`).
            **kwargs: ignored.
        """
        logger.warning("set_profiler: the torch profiler integration is not supported; ignored")
