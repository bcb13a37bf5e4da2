"""`PyTorchTrialContext`: what a PyTorchTrial uses to register and step its training objects."""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Callable, Iterable
from typing import Any

import torch

from determined import errors
from determined.pytorch import _data
from determined.pytorch._experimental import PyTorchExperimentalContext
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import MetricReducer, _WrappedReducer

logger = logging.getLogger("determined.pytorch")


class PyTorchTrialContext:
    """Built by `det.pytorch.init()`; passed to your trial's `__init__`.

    It registers the training objects (`wrap_model`, `wrap_optimizer`, ...), steps them
    (`backward`, `step_optimizer`) and answers questions about the trial (hyperparameters,
    batch sizes, ids, where the training loop is). `context.device` is the device of this
    process and `context.distributed` the Core API's distributed context.
    """

    def __init__(
        self,
        core_context: Any,
        *,
        trial_seed: int | None,
        hparams: dict[str, Any] | None,
        exp_conf: dict[str, Any] | None,
        aggregation_frequency: int = 1,
        steps_completed: int = 0,
        managed_training: bool = False,
        enable_tensorboard_logging: bool = True,
        device: torch.device | None = None,
        trial_id: int | None = None,
        experiment_id: int | None = None,
    ) -> None:
        if (
            isinstance(aggregation_frequency, bool)
            or not isinstance(aggregation_frequency, int)
            or aggregation_frequency < 1
        ):
            raise errors.InvalidExperimentException(
                f"aggregation_frequency must be an int >= 1, got {aggregation_frequency!r}"
            )
        self._core = core_context
        self.distributed = core_context.distributed
        self._trial_seed = trial_seed
        self._hparams = hparams
        self._exp_conf = exp_conf
        self._aggregation_frequency = aggregation_frequency
        self._steps_completed = steps_completed
        self._managed_training = managed_training
        self._enable_tensorboard_logging = enable_tensorboard_logging
        self._trial_id = trial_id
        self._experiment_id = experiment_id
        self.device = device if device is not None else torch.device("cpu")

        self.models: list[torch.nn.Module] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_schedulers: list[LRScheduler] = []
        self._reducers: list[_WrappedReducer] = []
        self._scaler: Any = None
        self._optimizer_steps: dict[
            int, int
        ] = {}  # id(lr scheduler wrapper) -> optimizer steps seen
        self._stop_requested = False
        self._tensorboard_writer: Any = None
        # The trial's callbacks, set by the training loop (legacy on_before_optimizer_step hooks).
        self._callbacks: dict[str, Any] = {}
        self.experimental = PyTorchExperimentalContext(self)

        # Kept up to date by the training loop.
        self._current_batch_idx = steps_completed
        self._epoch_len: int | None = None

    # --- registering training objects ------------------------------------------------------
    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Move a model to `context.device` and register it for checkpointing.

        After `experimental.use_amp()` on a CUDA device its forward pass runs under
        `torch.autocast`. When a torch.distributed process group of more than one process is
        running, the model is wrapped in `DistributedDataParallel`.

        Args:
            model: the model to train.

        Returns:
            The model to use from now on: the `DistributedDataParallel` wrapper when
            distributed, otherwise `model` itself.
        """
        model = model.to(self.device)
        if self.experimental._auto_amp:
            model = self.autocast_forward_pass(model)
        self.models.append(model)
        if (
            torch.distributed.is_available()
            and torch.distributed.is_initialized()
            and torch.distributed.get_world_size() > 1
        ):
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
            self.models[-1] = wrapped
            return wrapped
        return model

    def wrap_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        backward_passes_per_step: int = 1,
        fp16_compression: bool | None = None,
        average_aggregated_gradients: bool | None = None,
    ) -> torch.optim.Optimizer:
        """Register an optimizer for checkpointing and for `step_optimizer`.

        Args:
            optimizer: an optimizer over parameters of the wrapped models.
            backward_passes_per_step: horovod's gradient aggregation; it must be >= 1 but is not
                used otherwise (aggregation comes from the context's `aggregation_frequency`,
                set with `det.pytorch.init(aggregation_frequency=...)`).
            fp16_compression: horovod only; True logs a warning and is ignored.
            average_aggregated_gradients: ignored; whether aggregated gradients are averaged
                comes from the experiment config's `optimizations.average_aggregated_gradients`
                (default true).

        Returns:
            `optimizer` itself (there is no horovod wrapper here).

        Raises:
            det.errors.InvalidExperimentException: `backward_passes_per_step` is below 1.
        """
        if backward_passes_per_step < 1:
            raise errors.InvalidExperimentException(
                f"wrap_optimizer(backward_passes_per_step={backward_passes_per_step}): must be >= 1"
            )
        if fp16_compression:
            logger.warning("wrap_optimizer(fp16_compression=True) only applies to horovod; ignored")
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(
        self, lr_scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1
    ) -> Any:
        """Let Determined step (and checkpoint) an LR scheduler.

        The `LRScheduler` record is kept in `context.lr_schedulers`; you keep using your own
        scheduler object.

        Args:
            lr_scheduler: a torch LR scheduler whose `optimizer` was already passed to
                `wrap_optimizer`.
            step_mode: when Determined steps it (see `LRScheduler`).
            frequency: step every `frequency` epochs, batches or optimizer steps (by
                `step_mode`); an int >= 1.

        Returns:
            `lr_scheduler` itself.

        Raises:
            ValueError: the scheduler's optimizer was not wrapped, `frequency` is not an int
                >= 1, or a `ReduceLROnPlateau` is wrapped with a mode other than `MANUAL_STEP`.
            TypeError: `step_mode` is not an `LRScheduler.StepMode`.
        """
        optimizer = getattr(lr_scheduler, "optimizer", None)
        if not any(optimizer is o for o in self.optimizers):
            raise ValueError(
                "wrap_lr_scheduler: the scheduler's optimizer was not wrapped; call "
                "context.wrap_optimizer(optimizer) before wrapping its LR scheduler"
            )
        self.lr_schedulers.append(LRScheduler(lr_scheduler, step_mode, frequency))
        return lr_scheduler

    def wrap_scaler(self, scaler: Any) -> Any:
        """Register a gradient scaler for checkpointing.

        Pass it to `step_optimizer(scaler=...)` and scale the loss with it yourself. Only one
        scaler is kept: wrapping another replaces it. Not needed with `experimental.use_amp()`.

        Args:
            scaler: a `torch.amp.GradScaler` (or `torch.cuda.amp.GradScaler`).

        Returns:
            `scaler` itself.
        """
        self._scaler = scaler
        return scaler

    def wrap_reducer(
        self,
        reducer: Any,
        name: str | None = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> Any:
        """Register a custom `MetricReducer`, reset and reduced around training and/or validation.

        Its result is added to the metrics as `name`; without a name it must return a dict that is
        merged into the metrics.

        Args:
            reducer: the `MetricReducer` instance; feed it from `train_batch` / `evaluate_batch`.
            name: the metric name of its result, or None to merge the dict that its
                `cross_slot_reduce` returns into the metrics.
            for_training: reduce it into the training metrics, once per reported span of
                batches.
            for_validation: reduce it into the validation metrics, once per validation (only
                when the trial implements `evaluate_batch`).

        Returns:
            `reducer` itself.

        Raises:
            TypeError: `reducer` is not a `det.pytorch.MetricReducer`.
        """
        if not isinstance(reducer, MetricReducer):
            raise TypeError(
                f"wrap_reducer: expected a det.pytorch.MetricReducer, got {type(reducer).__name__}"
            )
        self._reducers.append(_WrappedReducer(reducer, name, for_training, for_validation))
        return reducer

    def configure_apex_amp(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported: NVIDIA apex is not available here, so this always raises.

        Use `torch.autocast` with `wrap_scaler(torch.amp.GradScaler())`, or
        `context.experimental.use_amp()`, instead.

        Args:
            *args: ignored.
            **kwargs: ignored.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "configure_apex_amp: NVIDIA apex is not supported; use torch.amp (torch.autocast and "
            "context.wrap_scaler(torch.amp.GradScaler())) instead"
        )

    # --- training steps -------------------------------------------------------------------
    def to_device(self, data: Any) -> Any:
        """Move every tensor in `data` to `context.device`.

        Dicts, lists, tuples and namedtuples are walked recursively and rebuilt; other values are
        returned as they are. The training loop already does this for each batch unless
        `experimental.disable_auto_to_device()` was called.

        Args:
            data: a tensor, or a (nested) dict, list or tuple holding tensors.

        Returns:
            The same structure with its tensors on `context.device`.
        """
        return _data.to_device(data, self.device)

    def backward(
        self,
        loss: torch.Tensor,
        gradient: torch.Tensor | None = None,
        retain_graph: bool = False,
        create_graph: bool = False,
    ) -> None:
        """Compute the gradients of `loss`; call it in `train_batch` instead of `loss.backward()`.

        After `experimental.use_amp()`, the loss is scaled by the context's gradient scaler first.
        Gradients accumulate until `step_optimizer` steps (see `aggregation_frequency`).

        Args:
            loss: the loss tensor.
            gradient: passed to `Tensor.backward` (the gradient with respect to a non-scalar
                `loss`).
            retain_graph: keep the graph, for another backward pass through it.
            create_graph: build the graph of the derivative (for higher-order gradients).
        """
        if self.experimental._auto_amp and self._scaler is not None:
            loss = self._scaler.scale(loss)
        loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def _is_aggregation_boundary(self) -> bool:
        return (self._current_batch_idx + 1) % self._aggregation_frequency == 0

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grads: Callable[[Iterable[torch.nn.Parameter]], None] | None = None,
        auto_zero_grads: bool = True,
        scaler: Any = None,
    ) -> None:
        """Step `optimizer` (only every `aggregation_frequency` batches), then zero its gradients.

        With an `aggregation_frequency` N > 1, gradients accumulate and the step happens only on
        batches where `(batch_idx + 1) % N == 0`, after the gradients are divided by N (unless the
        config's `optimizations.average_aggregated_gradients` is false). After the step, wrapped
        LR schedulers of this optimizer in `STEP_EVERY_OPTIMIZER_STEP` mode are stepped.

        Args:
            optimizer: a wrapped optimizer.
            clip_grads: called with the optimizer's parameters before the step (after unscaling
                when a scaler is used), e.g. `lambda p: torch.nn.utils.clip_grad_norm_(p, 1.0)`;
                callbacks' `on_before_optimizer_step(parameters)` run after it.
            auto_zero_grads: zero the optimizer's gradients after the step.
            scaler: a gradient scaler to step through (`scaler.step`, then `scaler.update`);
                after `experimental.use_amp()` the context's own scaler by default.

        Raises:
            ValueError: `optimizer` was not passed to `wrap_optimizer`.
        """
        for wrapped in self.optimizers:  # (a loop, not any(genexpr): this runs on every batch)
            if wrapped is optimizer:
                break
        else:
            raise ValueError(
                "step_optimizer: this optimizer was not wrapped with context.wrap_optimizer()"
            )
        if not self._is_aggregation_boundary():
            return

        # Built only when used: a list over every parameter on every batch is measurable for small models.
        def params() -> list[torch.nn.Parameter]:
            return [p for group in optimizer.param_groups for p in group["params"]]

        if scaler is None and self.experimental._auto_amp:
            scaler = self._scaler
        legacy_hooks = [
            c.on_before_optimizer_step
            for c in self._callbacks.values()
            if callable(getattr(c, "on_before_optimizer_step", None))
        ]
        if legacy_hooks:  # 0.13's ClipGradsL2Norm / ClipGradsL2Value callbacks
            clip_grads = _chain_clips(clip_grads, legacy_hooks)

        if self._aggregation_frequency > 1 and self._average_aggregated_gradients():
            for p in params():
                if p.grad is not None:
                    p.grad.div_(self._aggregation_frequency)
        if scaler is not None:
            if clip_grads is not None:
                scaler.unscale_(optimizer)
                clip_grads(params())
            scaler.step(optimizer)
            scaler.update()
        else:
            if clip_grads is not None:
                clip_grads(params())
            optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad()
        for wrapper in self.lr_schedulers:
            if (
                wrapper.step_mode is LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP
                and wrapper.scheduler.optimizer is optimizer
            ):
                steps = self._optimizer_steps.get(id(wrapper), 0) + 1
                self._optimizer_steps[id(wrapper)] = steps
                if steps % wrapper.frequency == 0:
                    wrapper.step()

    def _average_aggregated_gradients(self) -> bool:
        optimizations = (self._exp_conf or {}).get("optimizations") or {}
        return bool(optimizations.get("average_aggregated_gradients", True))

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

    def autocast_forward_pass(self, module: torch.nn.Module) -> torch.nn.Module:
        """Run a module's forward pass under `torch.autocast` on a CUDA device.

        This is what `experimental.use_amp()` does to the models wrapped after it.

        Args:
            module: the module; its `forward` is replaced in place on a CUDA device.

        Returns:
            `module` itself (unchanged when `context.device` is not a CUDA device).
        """
        if self.device.type != "cuda":
            return module
        forward = module.forward

        def autocast_forward(*args: Any, **kwargs: Any) -> Any:
            with torch.autocast("cuda"):
                return forward(*args, **kwargs)

        module.forward = autocast_forward
        return module


def _chain_clips(
    clip_grads: Callable[[Iterable[torch.nn.Parameter]], None] | None,
    hooks: list[Callable[[list[torch.nn.Parameter]], None]],
) -> Callable[[Iterable[torch.nn.Parameter]], None]:
    """`clip_grads` (if any), then each callback's `on_before_optimizer_step(parameters)`."""

    def clip(parameters: Iterable[torch.nn.Parameter]) -> None:
        params = list(parameters)
        if clip_grads is not None:
            clip_grads(params)
        for hook in hooks:
            hook(params)

    return clip
