"""`det.pytorch.load_trial_from_checkpoint_path`: rebuild a trained PyTorchTrial from its checkpoint."""

from __future__ import annotations

import importlib
import os
import pathlib
from typing import Any

import torch

from determined import core
from determined.pytorch import _state
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._trial import PyTorchTrial


def _import_trial_class(spec: str) -> type[PyTorchTrial]:
    module_name, _, qualname = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(
            f"cannot import {module_name!r} (the trial class {spec!r} recorded in the checkpoint): run from "
            "the directory holding the model code, or pass trial_class=YourTrial"
        ) from e
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class CheckpointLoadContext(PyTorchTrialContext):
    """A `PyTorchTrialContext` for building a trial outside training, to load a checkpoint into.

    It reports nothing and uploads nothing (a dummy Core API context on one CPU rank); use
    `det.pytorch.init()` to train. With the Trainer API, where a trial's `__init__` may take
    more arguments than the context, build the trial with it yourself::

        context = det.pytorch.CheckpointLoadContext(hparams=..., exp_conf=...)
        trial = MyTrial(context, my_arg=...)

    Args:
        hparams: the hyperparameters `context.get_hparam(s)` return.
        exp_conf: the experiment config `context.get_experiment_config()` returns.
    """

    def __init__(self, hparams: dict | None = None, exp_conf: dict[str, Any] | None = None) -> None:
        super().__init__(
            core._dummy_init(),
            trial_seed=0,
            hparams=hparams,
            exp_conf=exp_conf,
            managed_training=False,
            device=torch.device("cpu"),
        )


def load_trial_from_checkpoint_path(
    path: str | os.PathLike,
    trial_class: type[PyTorchTrial] | None = None,
    trial_kwargs: dict[str, Any] | None = None,
    torch_load_kwargs: dict[str, Any] | None = None,
) -> PyTorchTrial:
    """Instantiate the trial that wrote the checkpoint in `path` and load its weights (CPU, local context).

    The trial's models (in `trial.context.models` order), optimizers and LR schedulers are
    restored; the hyperparameters are the ones the trial trained with.
    """
    path = pathlib.Path(path)
    load_data = _state.read_load_data(path)
    if trial_class is None:
        spec = load_data.get("trial_cls_spec")
        if not spec:
            raise ValueError(
                f"{path / _state.LOAD_DATA_FILE} has no trial_cls_spec: pass trial_class=..."
            )
        trial_class = _import_trial_class(spec)
    core_context = core._dummy_init()
    context = PyTorchTrialContext(
        core_context,
        trial_seed=None,
        hparams=load_data.get("hparams") or {},
        exp_conf=load_data.get("experiment_config") or {},
        managed_training=False,
        device=torch.device("cpu"),
    )
    trial = trial_class(context, **(trial_kwargs or {}))
    load_kwargs = {"map_location": "cpu", "weights_only": False, **(torch_load_kwargs or {})}
    state = torch.load(path / _state.STATE_DICT_FILE, **load_kwargs)
    callbacks = trial.build_callbacks()
    _state.load_state_dict(state, context, callbacks)
    trial.context = context  # type: ignore[attr-defined]
    return trial
