"""`Determined`: the SDK's entry object, one session with one master."""

from __future__ import annotations

import base64
import logging
import os
import pathlib
import urllib.parse
import warnings
from collections.abc import Iterable
from typing import Any

from determined.common import api
from determined.common import context as context_mod
from determined.common.experimental import checkpoint, experiment, metrics, model, trial
from determined.common.experimental import user as user_mod
from determined.common.experimental._util import OrderBy
from determined.common.experimental.workspace import WorkspaceMethods

logger = logging.getLogger("determined.client")


class Determined(WorkspaceMethods):
    """Access to one master's experiments, trials and checkpoints (and its workspaces:
    `create_workspace`, `get_workspace`, `list_workspaces`, `delete_workspace`).

    The master is found as the CLI finds it: `master` if given, else `DET_MASTER` (with
    `DET_MASTER_TOKEN`), else the `master.json` a running master-lite wrote in its root dir.
    """

    def __init__(
        self,
        master: str | None = None,
        user: str | None = None,
        password: str | None = None,
        cert_path: str | None = None,
        cert_name: str | None = None,
        noverify: bool = False,
        *,
        token: str | None = None,
    ) -> None:
        """Connect to a master (nothing is sent until the first call).

        Args:
            master: the master's URL (`http://host:port`, `host:port`, with or without
                `/api/v1`); default as described above.
            user: a user of the master (docs/team.md): with `password`, sign in as this
                user; without, use the login `det user login` stored for this user.
            password: the user's password (with `user`).
            cert_path: not used (no TLS settings here); accepted for Determined's signature.
            cert_name: not used, as `cert_path`.
            noverify: not used, as `cert_path`.
            token: the master's token (ours); default `DET_MASTER_TOKEN`, or the token in
                `master.json` when the URL is that master's.

        Raises:
            determined.common.api.errors.MasterNotFoundException: no master address was found
                (the message says where it looked and how to start one).
        """
        del cert_path, cert_name, noverify  # no TLS settings here
        # Someone waits (a notebook cell, a script): an unreachable master is reported within
        # about a second, with where its address came from.
        self._session = api.connect(
            master, token=token, interactive=True, given_as="master=", user=user
        )
        if user is not None and password is not None:
            # A shared master's account (docs/team.md): sign in, use the session's token.
            self._session = user_mod.sign_in(self._session, user, password)
        self._master = self._session.master_url

    @classmethod
    def _from_session(cls, session: api.Session) -> Determined:
        """A `Determined` over an existing session (as Determined's CLI makes them)."""
        made = cls.__new__(cls)
        made._session = session
        made._master = session.master_url
        return made

    def create_experiment(
        self,
        config: str | pathlib.Path | dict,
        model_dir: str | pathlib.Path | None = None,
        includes: Iterable[str | pathlib.Path] | None = None,
        project_id: int | None = None,
        template: str | None = None,
    ) -> experiment.Experiment:
        """Create an experiment (activated) from a config and a model directory.

        Args:
            config: the path of a YAML/JSON config file, or the config as a dict.
            model_dir: the directory uploaded as the experiment's code (its context; honours
                `.detignore`); None uploads no code.
            includes: more files or directories added at the top level of the context.
            project_id: the project it goes into (default: the config's workspace and
                project, else the default project "Uncategorized").
            template: config templates are not supported here: must be None.

        Returns:
            The new `Experiment`.

        Raises:
            ValueError: config is neither a path nor a dict.
            NotImplementedError: a template was given.
            determined.common.context.ContextError: the model directory cannot be packed (too
                large: the message names the largest files).
            determined.common.api.errors.APIException: the master refused the config (400,
                every error with its path in `errors`).
        """
        if template is not None:
            raise NotImplementedError("create_experiment(template=...): no config templates here")
        config_field: Any
        if isinstance(config, (str, pathlib.Path)):
            config_field = pathlib.Path(os.fspath(config)).read_text(encoding="utf-8")
        elif isinstance(config, dict):
            config_field = config
        else:
            raise ValueError("config parameter must be dictionary or path")
        packed = None
        if model_dir is not None:
            packed = context_mod.pack(model_dir, includes=[pathlib.Path(i) for i in includes or ()])
        elif includes:
            raise ValueError("includes need a model_dir to add them to")
        body = {
            "config": config_field,
            "context": base64.b64encode(packed).decode("ascii") if packed is not None else None,
            "activate": True,
        }
        if project_id is not None:
            body["projectId"] = int(project_id)
        answer = self._session.post("/experiments", body)
        return experiment.Experiment._from_json(answer["experiment"], self._session)

    def get_experiment(self, experiment_id: int) -> experiment.Experiment:
        """One experiment, with its config.

        Args:
            experiment_id: the experiment's id.

        Returns:
            The `Experiment`.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id
                (`experiment 7 not found`).
        """
        answer = self._session.get(f"/experiments/{int(experiment_id)}")
        return experiment.Experiment._from_json(answer["experiment"], self._session)

    def list_experiments(
        self,
        sort_by: experiment.ExperimentSortBy | None = None,
        order_by: OrderBy | None = None,
        experiment_ids: list[int] | None = None,
        labels: list[str] | None = None,
        users: list[str] | None = None,
        states: list[experiment.ExperimentState] | None = None,
        name: str | None = None,
        project_id: int | None = None,
        *,
        archived: bool | None = None,
    ) -> list[experiment.Experiment]:
        """Experiments matching every filter given, sorted.

        Args:
            sort_by: an `ExperimentSortBy` (default ID).
            order_by: `OrderBy.ASC` (default) or `OrderBy.DESC`.
            experiment_ids: only these ids.
            labels: only experiments with a label in this list.
            users: only experiments these users own (usernames).
            states: only experiments in these `ExperimentState`s.
            name: only experiments whose name contains this.
            project_id: only experiments in this project.
            archived: only archived (True) or unarchived (False) ones; default both (ours).

        Returns:
            A list of `Experiment` (their `config` is read on first use).

        Raises:
            NotImplementedError: a sort this master has no data for (CHECKPOINT_SIZE,
                CHECKPOINT_COUNT).
        """
        answers = experiment.list_experiment_answers(
            self._session,
            sort_by=sort_by,
            order_by=order_by,
            experiment_ids=experiment_ids,
            labels=labels,
            states=states,
            name=name,
            archived=archived,
            users=users,
            project_id=project_id,
        )
        return [experiment.Experiment._from_json(e, self._session) for e in answers]

    def get_trial(self, trial_id: int) -> trial.Trial:
        """One trial.

        Args:
            trial_id: the trial's id.

        Returns:
            The `Trial`.

        Raises:
            determined.common.api.errors.NotFoundException: no trial has this id
                (`trial 7 not found`).
        """
        answer = self._session.get(f"/trials/{int(trial_id)}")
        return trial.Trial._from_json(answer["trial"], self._session)

    def get_checkpoint(self, uuid: str) -> checkpoint.Checkpoint:
        """One checkpoint.

        Args:
            uuid: the checkpoint's UUID.

        Returns:
            The `Checkpoint`.

        Raises:
            determined.common.api.errors.NotFoundException: no checkpoint has this UUID
                (`checkpoint <uuid> not found`).
        """
        answer = self._session.get(f"/checkpoints/{uuid}")
        return checkpoint.Checkpoint._from_json(answer["checkpoint"], self._session)

    def create_model(
        self,
        name: str,
        description: str | None = "",
        metadata: dict[str, Any] | None = None,
        labels: list[str] | None = None,
        workspace_name: str | None = None,
    ) -> model.Model:
        """Add a model to the model registry.

        Args:
            name: its name: unique in any case (as in Determined), not blank, without slashes or double
                spaces, and not only digits.
            description: a description.
            metadata: a JSON-serializable dict.
            labels: its labels.
            workspace_name: not used (this master has one workspace).

        Returns:
            The new `Model`.

        Raises:
            determined.common.api.errors.APIException: the name is taken (409) or invalid
                (400); the message says which.
        """
        del workspace_name  # one workspace here
        body = {
            "name": name,
            "description": description or "",
            "metadata": metadata or {},
            "labels": list(labels or []),
        }
        answer = self._session.post("/models", body)
        return model.Model._from_json(answer["model"], self._session)

    def get_model(self, identifier: str | int) -> model.Model:
        """A model of the registry, by name or by id (an int, or a string of digits).

        Args:
            identifier: the model's name or id.

        Returns:
            The `Model`.

        Raises:
            determined.common.api.errors.NotFoundException: no model has this name or id.
        """
        answer = self._session.get(model.model_path(identifier))
        return model.Model._from_json(answer["model"], self._session)

    def get_model_by_id(self, model_id: int) -> model.Model:
        """Deprecated in Determined (FutureWarning): `get_model(model_id)`.

        Args:
            model_id: the model's id.

        Returns:
            The `Model`.
        """
        warnings.warn(
            "Determined.get_model_by_id() is deprecated; call Determined.get_model() with a "
            "model name or an integer model id",
            FutureWarning,
            stacklevel=2,
        )
        return self.get_model(int(model_id))

    def list_models(
        self,
        sort_by: model.ModelSortBy = model.ModelSortBy.NAME,
        order_by: OrderBy | model.ModelOrderBy = OrderBy.ASCENDING,
        name: str | None = None,
        description: str | None = None,
        model_id: int | None = None,
        workspace_names: list[str] | None = None,
        workspace_ids: list[int] | None = None,
        *,
        labels: list[str] | None = None,
        archived: bool | None = None,
    ) -> list[model.Model]:
        """Models of the registry matching every filter given, sorted.

        Args:
            sort_by: a `ModelSortBy` (default NAME).
            order_by: `OrderBy.ASC` (default) or `OrderBy.DESC`.
            name: only models whose name contains this (any case).
            description: only models whose description contains this (any case).
            model_id: only the model with this id.
            workspace_names: not used (one workspace here).
            workspace_ids: not used (one workspace here).
            labels: only models with every one of these labels (ours).
            archived: only archived (True) or unarchived (False) models; default both (ours).

        Returns:
            A list of `Model`.
        """
        del workspace_names, workspace_ids  # one workspace here
        answers = model.list_model_answers(
            self._session,
            sort_by=sort_by,
            order_by=order_by,
            name=name,
            description=description,
            model_id=model_id,
            labels=labels,
            archived=archived,
        )
        return [model.Model._from_json(m, self._session) for m in answers]

    def get_models(
        self,
        sort_by: model.ModelSortBy = model.ModelSortBy.NAME,
        order_by: OrderBy | model.ModelOrderBy = OrderBy.ASCENDING,
        name: str | None = None,
        description: str | None = None,
        model_id: int | None = None,
        workspace_names: list[str] | None = None,
        workspace_ids: list[int] | None = None,
    ) -> list[model.Model]:
        """Deprecated in Determined (FutureWarning): the same as `list_models`."""
        warnings.warn(
            "Determined.get_models() is deprecated; call Determined.list_models() instead",
            FutureWarning,
            stacklevel=2,
        )
        return self.list_models(
            sort_by, order_by, name, description, model_id, workspace_names, workspace_ids
        )

    def get_model_labels(self) -> list[str]:
        """Every label some model of the registry has, sorted."""
        return list(self._session.get("/model/labels")["labels"])

    def iter_trials_metrics(
        self, trial_ids: list[int], group: str
    ) -> Iterable[metrics.TrialMetrics]:
        """The metric reports of one group of several trials, following them until they end.

        Args:
            trial_ids: the trials.
            group: "training", "validation", or any group the trials reported.

        Returns:
            An iterator of `TrialMetrics`.

        Raises:
            determined.common.api.errors.NotFoundException: a trial id is unknown.
        """
        return trial.iter_trial_metrics(self._session, list(trial_ids), group)

    def stream_trials_metrics(
        self, trial_ids: list[int], group: str
    ) -> Iterable[metrics.TrialMetrics]:
        """Deprecated in Determined (FutureWarning): the same as `iter_trials_metrics`.

        Args:
            trial_ids: the trials.
            group: the metric group.

        Returns:
            An iterator of `TrialMetrics`.
        """
        warnings.warn(
            "Determined.stream_trials_metrics is deprecated. Use iter_trials_metrics instead",
            FutureWarning,
            stacklevel=2,
        )
        return self.iter_trials_metrics(trial_ids, group)

    def logout(self) -> None:
        """End this object's sign-in (a user's session; the master token has none to end) and
        close its connection."""
        try:
            if self._session.token and self._session.token.startswith("session."):
                self._session.post("/auth/logout")
        finally:
            self._session.close()

    # -- users (docs/team.md) ---------------------------------------------------------------
    def create_user(
        self, username: str, admin: bool, password: str | None = None, remote: bool = False
    ) -> user_mod.User:
        """Create a user (admins only).

        Raises:
            ValueError: the password does not meet Determined's rules (at least 8 characters,
                an upper-case and a lower-case letter, a number), as in Determined.
        """
        return user_mod.create_user(self._session, username, admin, password, remote)

    def get_user_by_id(self, user_id: int) -> user_mod.User:
        """The user with this id."""
        return user_mod.User._from_json(
            self._session.get(f"/users/{int(user_id)}")["user"], self._session
        )

    def get_user_by_name(self, user_name: str) -> user_mod.User:
        """The user with this name (NotFoundException when none)."""
        path = f"/users/{urllib.parse.quote(user_name, safe='')}/by-username"
        return user_mod.User._from_json(self._session.get(path)["user"], self._session)

    def whoami(self) -> user_mod.User:
        """The signed-in user (the master token: the master's owner account)."""
        return user_mod.User._from_json(self._session.get("/me")["user"], self._session)

    def get_session_username(self) -> str:
        """The signed-in user's name."""
        return self.whoami().username

    def list_users(self, active: bool | None = None) -> list[user_mod.User]:
        """Every user; only (in)active ones when `active` is given."""
        return user_mod.list_users(self._session, active)
