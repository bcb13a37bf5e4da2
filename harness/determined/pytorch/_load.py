"""`det.pytorch.load_trial_from_checkpoint_path`: rebuild a trained PyTorchTrial from its checkpoint."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import warnings
from typing import Any

import torch

from determined import _import, core
from determined.pytorch import _state
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._trial import PyTorchTrial

logger = logging.getLogger("determined.pytorch")


def _import_trial_class(spec: str, code_dir: pathlib.Path) -> type[PyTorchTrial]:
    """The class `module:qualname` names, imported from the checkpoint's `code/` when it has one
    (as Determined does: the code that trained, not a newer copy in the current directory)."""
    module_name, _, qualname = spec.partition(":")
    if module_name == "__main__":
        raise ValueError(
            f"the checkpoint's trial class {qualname!r} was defined in the script that trained "
            f"({spec!r}), which cannot be imported: import it yourself and pass trial_class=, e.g. "
            f"`with det.import_from_path(checkpoint_dir + '/code'): import train` then "
            f"trial_class=train.{qualname}"
        )
    try:
        obj: Any = _import.import_module_in(code_dir, module_name)
    except ImportError as e:
        where = (
            f"from {code_dir}" if code_dir.is_dir() else "(the checkpoint has no code/ directory)"
        )
        raise ImportError(
            f"cannot import {module_name!r} {where} (the trial class {spec!r} recorded in the "
            "checkpoint): run from the directory holding the model code, or pass trial_class=YourTrial"
        ) from e
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@dataclasses.dataclass
class _CheckpointRecord:
    """How to rebuild the trial of a checkpoint, from whichever file its release wrote."""

    trial_cls_spec: str | None
    hparams: dict[str, Any]
    experiment_config: dict[str, Any]
    is_trainer: bool
    # Written before load_data.json existed (Determined <= 0.17.6): its trial may be of the
    # pre-0.14 interface (`build_model()`), whose checkpoints load as the bare model.
    legacy: bool


def _read_record(path: pathlib.Path) -> _CheckpointRecord:
    load_data_file = path / _state.LOAD_DATA_FILE
    metadata_file = path / "metadata.json"
    if load_data_file.exists():
        load_data = _state.read_load_data(path)
        if load_data.get("trial_type", "PyTorchTrial") != "PyTorchTrial":
            logger.warning(
                "%s says trial_type %r, not PyTorchTrial: loading it anyway",
                load_data_file,
                load_data.get("trial_type"),
            )
        return _CheckpointRecord(
            trial_cls_spec=load_data.get("trial_cls_spec"),
            hparams=load_data.get("hparams") or {},
            experiment_config=load_data.get("experiment_config") or {},
            is_trainer=bool(load_data.get("is_trainer", False)),
            legacy=False,
        )
    if metadata_file.exists():
        # Determined <= 0.17.6 wrote no load_data.json; Checkpoint.download() wrote the master's
        # record of the trial (hparams, experiment_config) as metadata.json.
        metadata = json.loads(metadata_file.read_text())
        config = metadata.get("experiment_config")
        if not isinstance(config, dict) or "hparams" not in metadata:
            raise ValueError(
                f"{metadata_file} has no experiment_config and hparams, and the checkpoint has no "
                f"{_state.LOAD_DATA_FILE}: download the checkpoint with Checkpoint.download() (which "
                "writes them), or pass trial_class=... and write them with "
                "Checkpoint.write_metadata_file('metadata.json')"
            )
        framework = str(metadata.get("framework", ""))
        if not framework.startswith("torch") and "torch_version" not in metadata:
            logger.warning(
                "%s says framework %r: not a PyTorchTrial checkpoint? loading it anyway",
                metadata_file,
                framework,
            )
        return _CheckpointRecord(
            # When this layout was written, every entrypoint was a trial class.
            trial_cls_spec=config.get("entrypoint"),
            hparams=metadata.get("hparams") or {},
            experiment_config=config,
            is_trainer=False,
            legacy=True,
        )
    raise FileNotFoundError(
        f"{path} has neither {_state.LOAD_DATA_FILE} nor metadata.json: checkpoints written by "
        "Determined 0.17.6 and earlier hold too little to be loaded from their files alone, and "
        "Checkpoint.download() writes the missing metadata.json. Download the checkpoint with "
        "Checkpoint.download(), or write it with Checkpoint.write_metadata_file('metadata.json')"
    )


def _trial_seed(config: dict[str, Any]) -> int:
    seed = (config.get("reproducibility") or {}).get("experiment_seed")
    return seed if isinstance(seed, int) else 0


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
    **kwargs: Any,
) -> PyTorchTrial:
    """Instantiate the trial that wrote the checkpoint in `path` and load its weights (CPU, local context).

    The trial's models (in `trial.context.models` order), optimizers and LR schedulers are
    restored; the hyperparameters are the ones the trial trained with. Checkpoints of
    Determined 0.13 to 0.21 load too: the trial class is imported from the checkpoint's `code/`
    directory, and where the checkpoint has no `load_data.json` (0.17.6 and earlier) the class,
    hyperparameters and config come from the `metadata.json` that `Checkpoint.download()` wrote.
    A checkpoint of a pre-0.14 trial (one with `build_model()`) loads as that bare model, as in
    Determined.

    Args:
        path: the checkpoint's directory (download it first, e.g. with `Checkpoint.download()`).
        trial_class: the trial class, where the recorded one cannot be imported (a trial defined
            in the training script's `__main__`) or another should be used.
        trial_kwargs: more keyword arguments for the trial's `__init__` (after the context).
        torch_load_kwargs: keyword arguments for `torch.load` (`map_location` is "cpu" unless
            given).
        **kwargs: deprecated (Determined's older form of `torch_load_kwargs`).

    Returns:
        The trial (or, for a pre-0.14 trial, its model).
    """
    if kwargs:
        if torch_load_kwargs:
            raise ValueError(
                "pass torch.load's keyword arguments either as torch_load_kwargs={...} or as "
                f"keyword arguments ({sorted(kwargs)}), not both"
            )
        warnings.warn(
            "passing torch.load's keyword arguments to load_trial_from_checkpoint_path() is "
            "deprecated: pass torch_load_kwargs={...}",
            FutureWarning,
            stacklevel=2,
        )
        torch_load_kwargs = kwargs
    path = pathlib.Path(path)
    record = _read_record(path)
    if trial_class is None:
        if not record.trial_cls_spec:
            raise ValueError(
                f"the checkpoint in {path} names no trial class (no trial_cls_spec): pass "
                "trial_class=..."
            )
        trial_class = _import_trial_class(record.trial_cls_spec, path / "code")
    context = PyTorchTrialContext(
        core._dummy_init(),
        trial_seed=None if record.is_trainer else _trial_seed(record.experiment_config),
        hparams=record.hparams,
        exp_conf=record.experiment_config,
        managed_training=False,
        device=torch.device("cpu"),
    )
    trial = trial_class(context, **(trial_kwargs or {}))
    load_kwargs = {"map_location": "cpu", "weights_only": False, **(torch_load_kwargs or {})}
    state = torch.load(path / _state.STATE_DICT_FILE, **load_kwargs)
    if record.legacy:
        model = _load_build_model_trial(trial, state, path)
        if model is not None:
            return model  # type: ignore[return-value]  # Determined returns the bare model too
    callbacks = trial.build_callbacks()
    _state.load_state_dict(state, context, callbacks)
    trial.context = context  # type: ignore[attr-defined]
    return trial


def _load_build_model_trial(
    trial: PyTorchTrial, state: dict[str, Any], path: pathlib.Path
) -> torch.nn.Module | None:
    """The model of a pre-0.14 trial (`build_model()`) with its weights; None for a newer trial."""
    build_model = getattr(trial, "build_model", None)
    if not callable(build_model):
        if "model_state_dict" in state:
            raise ValueError(
                f"{path / _state.STATE_DICT_FILE} holds one model_state_dict (Determined before "
                f"0.12.13) but {type(trial).__name__} has no build_model() to build the model with"
            )
        return None
    model = build_model()
    if "model_state_dict" in state:  # before 0.12.13: the single model
        model.load_state_dict(state["model_state_dict"])
    else:
        model.load_state_dict(state["models_state_dict"][0])
    return model
