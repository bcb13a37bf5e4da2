"""Determined's Python SDK: experiments, trials and checkpoints of a master, from Python.

    from determined.experimental import client

    exp = client.create_experiment(config="const.yaml", model_dir=".")
    state = exp.wait()                       # ExperimentState.COMPLETED
    best = exp.list_checkpoints(max_results=1)[0]
    path = best.download()                   # ~/.cache/determined/checkpoints/<uuid>

The module's functions use one `Determined` object, made on first use (the master found as
`det` finds it: `DET_MASTER`, else a running master-lite's `master.json`) or by `login()`.
To talk to several masters, make `Determined(master=...)` objects instead. docs/sdk.md lists
what is the same as Determined and what differs.
"""

from __future__ import annotations

import functools
import logging
import pathlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from determined.common import api as _api
from determined.common.experimental import (
    Checkpoint,
    CheckpointOrderBy,
    CheckpointSortBy,
    CheckpointState,
    CheckpointTrainingMetadata,
    Determined,
    DownloadMode,
    Experiment,
    ExperimentOrderBy,
    ExperimentSortBy,
    ExperimentState,
    Model,
    ModelOrderBy,
    ModelSortBy,
    ModelVersion,
    OrderBy,
    Trial,
    TrialMetrics,
    TrialOrderBy,
    TrialSortBy,
    TrialState,
)

logger = logging.getLogger("determined.client")

_determined: Determined | None = None

C = TypeVar("C", bound=Callable[..., Any])


def _require_singleton(fn: C) -> C:
    @functools.wraps(fn)
    def with_singleton(*args: Any, **kwargs: Any) -> Any:
        global _determined
        if _determined is None:
            _determined = Determined()
        return fn(*args, **kwargs)

    return cast(C, with_singleton)


def _singleton() -> Determined:
    assert _determined is not None  # made by _require_singleton
    return _determined


def login(
    master: str | None = None,
    user: str | None = None,
    password: str | None = None,
    cert_path: str | None = None,
    cert_name: str | None = None,
    noverify: bool = False,
    *,
    token: str | None = None,
) -> None:
    """Choose the master the module's functions use; call it before any of them, or not at all
    (they then find the master as `det` does).

    Args:
        master: the master's URL; default `DET_MASTER`, else a running master-lite's
            `master.json`.
        user: a user of the master (docs/team.md): with `password`, sign in as this user;
            without, use the login `det user login` stored for this user.
        password: the user's password (with `user`).
        cert_path: not used (no TLS settings here).
        cert_name: not used, as `cert_path`.
        noverify: not used, as `cert_path`.
        token: the master's token (ours); default `DET_MASTER_TOKEN` or `master.json`'s.

    Raises:
        ValueError: login() or another function of this module was called before.
        determined.common.api.errors.MasterNotFoundException: no master address was found.
    """
    global _determined
    if _determined is not None:
        raise ValueError(
            "You can only call login() once, before any other calls to any functions in the client "
            "module.  If you have reason to connect to multiple masters, you should use explicit "
            "client.Determined() objects, which each expose the same functions as this module."
        )
    _determined = Determined(master, user, password, cert_path, cert_name, noverify, token=token)


def logout() -> None:
    """Forget the module's `Determined` object (the next function call finds the master again)."""
    global _determined
    if _determined is None:
        logger.warning("client has not been logged in; client.logout() is a no-op")
        return
    _determined.logout()
    _determined = None


@_require_singleton
def create_experiment(
    config: str | pathlib.Path | dict,
    model_dir: str | pathlib.Path | None = None,
    includes: Iterable[str | pathlib.Path] | None = None,
    project_id: int | None = None,
    template: str | None = None,
) -> Experiment:
    """Create an experiment (activated) from a config and a model directory.

    Args:
        config: the path of a YAML/JSON config file, or the config as a dict.
        model_dir: the directory uploaded as the experiment's code; None uploads none.
        includes: more files or directories added at the top level of the code.
        project_id: the project it goes into (default: the config's, else Uncategorized).
        template: must be None (no config templates here).

    Returns:
        The new `Experiment`.

    Raises:
        NotImplementedError: a template was given.
        determined.common.api.errors.APIException: the master refused the config (every error
            with its path in `errors`).
    """
    return _singleton().create_experiment(config, model_dir, includes, project_id, template)


@_require_singleton
def get_experiment(experiment_id: int) -> Experiment:
    """One experiment, with its config.

    Args:
        experiment_id: the experiment's id.

    Returns:
        The `Experiment`.

    Raises:
        determined.common.api.errors.NotFoundException: no experiment has this id.
    """
    return _singleton().get_experiment(experiment_id)


@_require_singleton
def list_experiments(
    sort_by: ExperimentSortBy | None = None,
    order_by: OrderBy | None = None,
    experiment_ids: list[int] | None = None,
    labels: list[str] | None = None,
    users: list[str] | None = None,
    states: list[ExperimentState] | None = None,
    name: str | None = None,
    project_id: int | None = None,
    *,
    archived: bool | None = None,
) -> list[Experiment]:
    """Experiments matching every filter given, sorted.

    Args:
        sort_by: an `ExperimentSortBy` (default ID).
        order_by: `OrderBy.ASC` (default) or `OrderBy.DESC`.
        experiment_ids: only these ids.
        labels: only experiments with a label in this list.
        users: only experiments these users own (usernames).
        states: only experiments in these states.
        name: only experiments whose name contains this.
        project_id: only experiments in this project.
        archived: only archived (True) or unarchived (False) ones; default both (ours).

    Returns:
        A list of `Experiment`.

    Raises:
        NotImplementedError: a sort this master has no data for.
    """
    return _singleton().list_experiments(
        sort_by=sort_by,
        order_by=order_by,
        experiment_ids=experiment_ids,
        labels=labels,
        users=users,
        states=states,
        name=name,
        project_id=project_id,
        archived=archived,
    )


@_require_singleton
def get_trial(trial_id: int) -> Trial:
    """One trial.

    Args:
        trial_id: the trial's id.

    Returns:
        The `Trial`.

    Raises:
        determined.common.api.errors.NotFoundException: no trial has this id.
    """
    return _singleton().get_trial(trial_id)


@_require_singleton
def get_checkpoint(uuid: str) -> Checkpoint:
    """One checkpoint.

    Args:
        uuid: the checkpoint's UUID.

    Returns:
        The `Checkpoint`.

    Raises:
        determined.common.api.errors.NotFoundException: no checkpoint has this UUID.
    """
    return _singleton().get_checkpoint(uuid)


@_require_singleton
def create_model(
    name: str,
    description: str | None = "",
    metadata: dict[str, Any] | None = None,
    labels: list[str] | None = None,
    workspace_name: str | None = None,
) -> Model:
    """Add a model to the model registry.

    Args:
        name: its unique name (not blank, no slashes or double spaces, not only digits).
        description: a description.
        metadata: a JSON-serializable dict.
        labels: its labels.
        workspace_name: not used (one workspace here).

    Returns:
        The new `Model`.

    Raises:
        determined.common.api.errors.APIException: the name is taken (409) or invalid (400).
    """
    return _singleton().create_model(name, description, metadata, labels, workspace_name)


@_require_singleton
def get_model(identifier: str | int) -> Model:
    """A model of the registry, by name or id.

    Args:
        identifier: the model's name, or its id.

    Returns:
        The `Model`.

    Raises:
        determined.common.api.errors.NotFoundException: no model has this name or id.
    """
    return _singleton().get_model(identifier)


@_require_singleton
def get_model_by_id(model_id: int) -> Model:
    """Deprecated in Determined (FutureWarning): `get_model(model_id)`.

    Args:
        model_id: the model's id.

    Returns:
        The `Model`.
    """
    return _singleton().get_model_by_id(model_id)


@_require_singleton
def list_models(
    sort_by: ModelSortBy = ModelSortBy.NAME,
    order_by: OrderBy | ModelOrderBy = OrderBy.ASCENDING,
    name: str | None = None,
    description: str | None = None,
    model_id: int | None = None,
    workspace_names: list[str] | None = None,
    workspace_ids: list[int] | None = None,
    *,
    labels: list[str] | None = None,
    archived: bool | None = None,
) -> list[Model]:
    """Models of the registry matching every filter given, sorted.

    Args:
        sort_by: a `ModelSortBy` (default NAME).
        order_by: `OrderBy.ASC` (default) or `OrderBy.DESC`.
        name: only names containing this (any case).
        description: only descriptions containing this (any case).
        model_id: only the model with this id.
        workspace_names: not used (one workspace here).
        workspace_ids: not used (one workspace here).
        labels: only models with every one of these labels (ours).
        archived: only archived (True) or unarchived (False) ones (ours).

    Returns:
        A list of `Model`.
    """
    return _singleton().list_models(
        sort_by,
        order_by,
        name,
        description,
        model_id,
        workspace_names,
        workspace_ids,
        labels=labels,
        archived=archived,
    )


@_require_singleton
def get_models(
    sort_by: ModelSortBy = ModelSortBy.NAME,
    order_by: OrderBy | ModelOrderBy = OrderBy.ASCENDING,
    name: str | None = None,
    description: str | None = None,
    model_id: int | None = None,
    workspace_names: list[str] | None = None,
    workspace_ids: list[int] | None = None,
) -> list[Model]:
    """Deprecated in Determined (FutureWarning): the same as `list_models`."""
    return _singleton().get_models(
        sort_by, order_by, name, description, model_id, workspace_names, workspace_ids
    )


@_require_singleton
def get_model_labels() -> list[str]:
    """Every label some model of the registry has, sorted."""
    return _singleton().get_model_labels()


@_require_singleton
def iter_trials_metrics(trial_ids: list[int], group: str) -> Iterable[TrialMetrics]:
    """The metric reports of one group of several trials, following them until they end.

    Args:
        trial_ids: the trials.
        group: "training", "validation", or any group the trials reported.

    Returns:
        An iterator of `TrialMetrics`.

    Raises:
        determined.common.api.errors.NotFoundException: a trial id is unknown.
    """
    return _singleton().iter_trials_metrics(trial_ids, group)


def stream_trials_metrics(trial_ids: list[int], group: str) -> Iterable[TrialMetrics]:
    """Deprecated in Determined (FutureWarning): the same as `iter_trials_metrics`.

    Args:
        trial_ids: the trials.
        group: the metric group.

    Returns:
        An iterator of `TrialMetrics`.
    """
    warnings.warn(
        "client.stream_trials_metrics is deprecated. Use client.iter_trials_metrics instead",
        FutureWarning,
        stacklevel=2,
    )
    return iter_trials_metrics(trial_ids, group)


@_require_singleton
def _get_singleton_session() -> _api.Session:
    return _singleton()._session


# The user functions (docs/team.md), beside this module: they use its singleton.
from determined.experimental import _client_users, _client_workspaces  # noqa: E402
from determined.experimental._client_users import *  # noqa: E402, F403
from determined.experimental._client_workspaces import *  # noqa: E402, F403

__all__ = [
    "Checkpoint",
    "CheckpointOrderBy",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointTrainingMetadata",
    "Determined",
    "DownloadMode",
    "Experiment",
    "ExperimentOrderBy",
    "ExperimentSortBy",
    "ExperimentState",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "ModelVersion",
    "OrderBy",
    "Trial",
    "TrialMetrics",
    "TrialOrderBy",
    "TrialSortBy",
    "TrialState",
    "create_experiment",
    "create_model",
    "get_checkpoint",
    "get_experiment",
    "get_model",
    "get_model_by_id",
    "get_model_labels",
    "get_models",
    "get_trial",
    "iter_trials_metrics",
    "list_experiments",
    "list_models",
    "login",
    "logout",
    "stream_trials_metrics",
    *_client_users.__all__,
    *_client_workspaces.__all__,
]
