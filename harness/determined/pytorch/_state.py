"""What a PyTorchTrial checkpoint holds, and how it is written and read back.

Files: `state_dict.pth` (models, optimizers, LR schedulers, callbacks, RNG state, optional
scaler), `trial_state.pkl` (where training stood) and `load_data.json` (how to rebuild the
trial: class, hparams, config). The checkpoint metadata is written by the Core API.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import pickle
import random
from typing import Any

import numpy as np
import torch

import determined
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext

STATE_DICT_FILE = "state_dict.pth"
TRIAL_STATE_FILE = "trial_state.pkl"
LOAD_DATA_FILE = "load_data.json"


@dataclasses.dataclass
class TrialState:
    """Progress of a trial; pickled as a plain dict so it does not depend on this class."""

    trial_id: int | None = None
    batches_trained: int = 0
    epochs_trained: int = 0
    last_ckpt: int | None = None  # batches_trained at the last checkpoint
    last_val: int | None = None  # batches_trained at the last validation
    last_validation_metrics: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialState:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def checkpoint_metadata(steps_completed: int) -> dict[str, Any]:
    return {
        "determined_version": determined.__version__,
        "steps_completed": steps_completed,
        "framework": f"torch-{torch.__version__}",
        "format": "pickle",
    }


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The user's module inside a DistributedDataParallel wrapper (so checkpoints load anywhere)."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "cpu_rng_state": torch.random.get_rng_state(),
        "np_rng_state": np.random.get_state(),
        "random_rng_state": random.getstate(),
    }
    if torch.cuda.is_available():
        state["gpu_rng_state"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    if "cpu_rng_state" in state:
        torch.random.set_rng_state(state["cpu_rng_state"].cpu())
    if "np_rng_state" in state:
        np.random.set_state(state["np_rng_state"])
    if "random_rng_state" in state:
        random.setstate(state["random_rng_state"])
    if "gpu_rng_state" in state and torch.cuda.is_available():
        gpu_states = state["gpu_rng_state"]
        if len(gpu_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all([s.cpu() for s in gpu_states])


def build_state_dict(
    context: PyTorchTrialContext, callbacks: dict[str, PyTorchCallback]
) -> dict[str, Any]:
    state: dict[str, Any] = {
        "models_state_dict": [unwrap_model(m).state_dict() for m in context.models],
        "optimizers_state_dict": [o.state_dict() for o in context.optimizers],
        "lr_schedulers_state_dict": [s.state_dict() for s in context.lr_schedulers],
        "callbacks": {name: cb.state_dict() for name, cb in callbacks.items()},
        "rng_state": rng_state(),
    }
    if context._scaler is not None:
        state["scaler_state_dict"] = context._scaler.state_dict()
    return state


def _check_count(what: str, saved: list[Any], registered: list[Any]) -> None:
    if len(saved) != len(registered):
        raise RuntimeError(
            f"the checkpoint has {len(saved)} {what} but the trial wrapped {len(registered)}: build the "
            f"same {what} (in the same order) as the trial that saved it"
        )


def load_state_dict(
    state: dict[str, Any], context: PyTorchTrialContext, callbacks: dict[str, PyTorchCallback]
) -> None:
    """Restore models, optimizers, schedulers, scaler, callbacks and RNG from `state_dict.pth`."""
    _check_count("models", state.get("models_state_dict", []), context.models)
    for model, model_state in zip(context.models, state["models_state_dict"], strict=False):
        unwrap_model(model).load_state_dict(model_state)
    _check_count("optimizers", state.get("optimizers_state_dict", []), context.optimizers)
    for optimizer, opt_state in zip(
        context.optimizers, state["optimizers_state_dict"], strict=False
    ):
        optimizer.load_state_dict(opt_state)
    _check_count("lr schedulers", state.get("lr_schedulers_state_dict", []), context.lr_schedulers)
    for scheduler, sched_state in zip(
        context.lr_schedulers, state["lr_schedulers_state_dict"], strict=False
    ):
        scheduler.load_state_dict(sched_state)
    if context._scaler is not None and "scaler_state_dict" in state:
        context._scaler.load_state_dict(state["scaler_state_dict"])
    saved_callbacks = state.get("callbacks") or {}
    for name, callback in callbacks.items():
        if name in saved_callbacks:
            callback.load_state_dict(saved_callbacks[name])
    if "rng_state" in state:
        restore_rng_state(state["rng_state"])


def write_checkpoint_files(
    path: pathlib.Path,
    state: dict[str, Any],
    trial_state: TrialState,
    load_data: dict[str, Any],
) -> None:
    torch.save(state, path / STATE_DICT_FILE)
    with open(path / TRIAL_STATE_FILE, "wb") as f:
        pickle.dump(trial_state.to_dict(), f)
    with open(path / LOAD_DATA_FILE, "w") as f:
        json.dump(load_data, f, indent=2, default=str)


def read_state_dict(path: pathlib.Path, map_location: Any = None) -> dict[str, Any]:
    file = path / STATE_DICT_FILE
    if not file.exists():
        raise FileNotFoundError(
            f"{file} does not exist: checkpoint {path.name} was not written by a PyTorchTrial"
        )
    # Our own file: it holds numpy RNG state, which weights_only loading refuses.
    return torch.load(file, map_location=map_location, weights_only=False)


def read_trial_state(path: pathlib.Path) -> TrialState | None:
    file = path / TRIAL_STATE_FILE
    if not file.exists():
        return None
    with open(file, "rb") as f:
        raw = pickle.load(f)
    return TrialState.from_dict(raw if isinstance(raw, dict) else vars(raw))


def read_load_data(path: pathlib.Path) -> dict[str, Any]:
    file = path / LOAD_DATA_FILE
    if not file.exists():
        raise FileNotFoundError(
            f"{file} does not exist: checkpoint {path.name} was not written by det.pytorch"
        )
    with open(file) as f:
        return json.load(f)


def trial_class_spec(trial: Any) -> str:
    cls = type(trial)
    return f"{cls.__module__}:{cls.__qualname__}"
