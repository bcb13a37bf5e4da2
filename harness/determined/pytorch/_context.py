"""`PyTorchTrialContext`: what a PyTorchTrial uses to register and step its training objects."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import torch

from determined import errors
from determined.pytorch import _data
from determined.pytorch._context_info import TrialInfo
from determined.pytorch._experimental import PyTorchExperimentalContext
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import MetricReducer, _FunctionReducer, _WrappedReducer

logger = logging.getLogger("determined.pytorch")


class PyTorchTrialContext(TrialInfo):
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
        """Register a custom `MetricReducer` (or a plain function), reset and reduced around
        training and/or validation.

        Its result is added to the metrics as `name`; without a name it must return a dict that is
        merged into the metrics.

        Args:
            reducer: the `MetricReducer` instance; feed it from `train_batch` / `evaluate_batch`.
                Or, as in Determined, a function of one list: the returned reducer's
                `update(value)` collects values, and after a round the function gets all of
                them (every rank's) and returns the metric.
            name: the metric name of its result, or None to merge the dict that its
                `cross_slot_reduce` returns into the metrics.
            for_training: reduce it into the training metrics, once per reported span of
                batches.
            for_validation: reduce it into the validation metrics, once per validation (only
                when the trial implements `evaluate_batch`).

        Returns:
            `reducer` itself; for a function, the `MetricReducer` whose `update(value)` feeds it.

        Raises:
            TypeError: `reducer` is neither a `det.pytorch.MetricReducer` nor callable.
        """
        if not isinstance(reducer, MetricReducer):
            if not callable(reducer):
                raise TypeError(
                    "wrap_reducer: expected a det.pytorch.MetricReducer or a function of a list "
                    f"of values, got {type(reducer).__name__}"
                )
            reducer = _FunctionReducer(reducer)
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
