"""Validation of a `PyTorchTrial` under the managed training loop: `evaluate_batch` (with the
trial's reducers and the context's custom reducers, across ranks) or `evaluate_full_dataset`
(on the chief).

A base class of the PyTorch adapter of the loop (`_controller._PyTorchTrialController`).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch

from determined.pytorch import _data
from determined.pytorch._reducer import cross_slot_reduce, per_slot_reduce, to_number
from determined.pytorch._trial import _overrides
from determined.pytorch._trial_metrics import cross_slot_custom

if TYPE_CHECKING:
    from determined.pytorch._callback import PyTorchCallback
    from determined.pytorch._context import PyTorchTrialContext
    from determined.pytorch._trial import PyTorchTrial


class PyTorchValidation:
    """The validation hooks of the PyTorch training loop."""

    # Set by the loop adapter (and its base, `determined._loop.TrainingLoop`); declared here for
    # the type checker.
    trial: PyTorchTrial
    context: PyTorchTrialContext
    dist: Any
    is_chief: bool
    test_mode: bool
    callbacks: dict[str, PyTorchCallback]
    searcher_metric: str | None
    _validation_loader: Any

    if TYPE_CHECKING:

        def _add_time_keys(self, metrics: dict[str, Any]) -> dict[str, Any]: ...

        def searcher_value(self, metrics: dict) -> float: ...

    # --- validation ---------------------------------------------------------------------------
    def _evaluate(self) -> dict:
        for model in self.context.models:
            model.eval()
        for callback in self.callbacks.values():
            callback.on_validation_start()
        with torch.no_grad():
            if _overrides(self.trial, "evaluate_batch"):
                metrics = self._evaluate_batches()
            elif _overrides(self.trial, "evaluate_full_dataset"):
                metrics = self._evaluate_full_dataset()
            else:
                raise NotImplementedError(
                    f"{type(self.trial).__name__} must implement evaluate_batch(batch, batch_idx) or "
                    "evaluate_full_dataset(data_loader)"
                )
        for model in self.context.models:
            model.train()
        return self._add_time_keys({k: to_number(v) for k, v in metrics.items()})

    def _after_validation(self, metrics: dict) -> None:
        for callback in self.callbacks.values():
            callback.on_validation_end(metrics)
        if self.is_chief and not self.test_mode and self.searcher_metric is not None:
            self.searcher_value(metrics)  # a missing searcher metric fails at once

    def _validation_torch_loader(self, shard: bool) -> Any:
        loader = self._validation_loader
        if isinstance(loader, _data.DataLoader):
            if shard:
                return loader.get_data_loader(
                    repeat=False, num_replicas=self.dist.size, rank=self.dist.rank
                )
            return loader.get_data_loader(repeat=False)
        if isinstance(loader, torch.utils.data.DataLoader):
            return loader
        raise TypeError(
            "build_validation_data_loader must return a det.pytorch.DataLoader (or a "
            f"torch.utils.data.DataLoader), got {type(loader).__name__}"
        )

    def _evaluate_batches(self) -> dict[str, Any]:
        for reducer in self.context._reducers:
            if reducer.for_validation:
                reducer.reducer.reset()
        for callback in self.callbacks.values():
            callback.on_validation_epoch_start()
        takes_batch_idx = len(inspect.signature(self.trial.evaluate_batch).parameters) >= 2
        outputs: list[dict[str, Any]] = []
        for idx, batch in enumerate(self._validation_torch_loader(shard=True)):
            if self.context.experimental._auto_to_device:
                batch = self.context.to_device(batch)
            result = (
                self.trial.evaluate_batch(batch, idx)
                if takes_batch_idx
                # Older trials define evaluate_batch(self, batch).
                else self.trial.evaluate_batch(batch)  # type: ignore[call-arg]
            )
            if not isinstance(result, dict):
                raise TypeError(
                    f"evaluate_batch must return a dict of metrics, got {type(result).__name__}"
                )
            outputs.append(result)
        for callback in self.callbacks.values():
            callback.on_validation_epoch_end(outputs)
        reducers = self.trial.evaluation_reducer()
        mine = per_slot_reduce(outputs, reducers) if outputs else {}
        custom = [r.reducer.per_slot_reduce() for r in self.context._reducers if r.for_validation]
        everyone = self.dist.allgather((mine, len(outputs), custom))
        metrics = cross_slot_reduce([e[0] for e in everyone], [e[1] for e in everyone], reducers)
        metrics.update(
            cross_slot_custom(self.context._reducers, [e[2] for e in everyone], for_training=False)
        )
        return metrics

    def _evaluate_full_dataset(self) -> dict[str, Any]:
        metrics = None
        if self.is_chief:
            metrics = self.trial.evaluate_full_dataset(self._validation_torch_loader(shard=False))
            if not isinstance(metrics, dict):
                raise TypeError(
                    f"evaluate_full_dataset must return a dict of metrics, got {type(metrics).__name__}"
                )
            metrics = {k: to_number(v) for k, v in metrics.items()}
        return self.dist.broadcast(metrics)
