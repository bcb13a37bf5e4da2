"""What describes a core_v2 run: Determined's `Config` (and its older split into `DefaultConfig`
and `UnmanagedConfig`, still accepted)."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Config:
    """A run's experiment config, used when the run trains outside the master (unmanaged).

    Attributes:
        name: the experiment's name (default `unmanaged-<8 hex digits>`).
        hparams: the run's hyperparameter values (stored as constants).
        data: free-form `data` of the experiment config.
        description: the experiment's description.
        labels: the experiment's labels.
        workspace: the workspace of `project` (give both or neither).
        project: the project the run's experiment goes into (default: Uncategorized).
        checkpoint_storage: where checkpoints go: a directory path or a storage dict (default:
            the master's own checkpoint storage).
        searcher: `{"metric": ..., "smaller_is_better": ...}`: what "best" means for the run.
        external_experiment_id: names the experiment across kernels: runs with the same one
            are trials of one experiment.
        external_trial_id: names the trial within it: a run with the same external ids resumes
            that trial (same trial id, its latest checkpoint in `core_v2.info`).
    """

    name: str | None = None
    hparams: dict[str, Any] | None = None
    data: dict | None = None
    description: str | None = None
    labels: list[str] | None = None
    workspace: str | None = None
    project: str | None = None
    checkpoint_storage: str | dict[str, Any] | None = None
    searcher: dict[str, Any] | None = None
    external_experiment_id: str | None = None
    external_trial_id: str | None = None


@dataclasses.dataclass
class DefaultConfig(Config):
    """The config's defaults (Determined's older spelling; use `Config`)."""


@dataclasses.dataclass
class UnmanagedConfig(Config):
    """The unmanaged-only part of the config (Determined's older spelling; use `Config`)."""


def merge_config(
    config: Config | None, defaults: Config | None, unmanaged: Config | None
) -> Config:
    """One `Config` from `config=`, or from `defaults=` completed by `unmanaged=`."""
    merged = config if config is not None else _merge_split(defaults, unmanaged)
    if merged.external_trial_id is not None and merged.external_experiment_id is None:
        raise ValueError(
            "core_v2.init: external_trial_id needs external_experiment_id too (the trial is "
            "found again within its experiment)"
        )
    return merged


def _merge_split(defaults: Config | None, unmanaged: Config | None) -> Config:
    if defaults is None and unmanaged is None:
        raise ValueError(
            "core_v2.init: pass config=core_v2.Config(name=..., hparams=...) (or defaults=), "
            "or run as a trial the master started"
        )
    merged = dataclasses.replace(defaults) if defaults is not None else Config()
    if unmanaged is not None:
        for field in ("workspace", "project", "external_experiment_id", "external_trial_id"):
            if getattr(merged, field) is None:
                setattr(merged, field, getattr(unmanaged, field))
    return merged


__all__ = ["Config", "DefaultConfig", "UnmanagedConfig", "merge_config"]
