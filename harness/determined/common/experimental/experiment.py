"""`Experiment`: an experiment, its lifecycle actions, trials and checkpoints."""

from __future__ import annotations

import enum
import pathlib
import sys
import time
from typing import Any

from determined.common import api
from determined.common.experimental import _util, trial
from determined.common.experimental._experiment_edits import ExperimentEdits
from determined.common.experimental._experiment_reads import ExperimentReads
from determined.common.experimental._util import OrderBy


class ExperimentState(enum.Enum):
    """An experiment's state (Determined's members and values). As Determined (0.2x+) reports
    them, an active experiment is QUEUED (none of its trials holds slots) or RUNNING (one does);
    then PAUSED, STOPPING_COMPLETED, STOPPING_CANCELED, STOPPING_ERROR, COMPLETED, CANCELED and
    ERROR. `list_experiments(states=[ExperimentState.ACTIVE])` matches both QUEUED and RUNNING."""

    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    COMPLETED = "STATE_COMPLETED"
    CANCELED = "STATE_CANCELED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    DELETING = "STATE_DELETING"
    DELETE_FAILED = "STATE_DELETE_FAILED"
    STOPPING_KILLED = "STATE_STOPPING_KILLED"
    QUEUED = "STATE_QUEUED"
    PULLING = "STATE_PULLING"
    STARTING = "STATE_STARTING"
    RUNNING = "STATE_RUNNING"


TERMINAL_STATES = {
    ExperimentState.COMPLETED,
    ExperimentState.CANCELED,
    ExperimentState.DELETED,
    ExperimentState.ERROR,
}


class ExperimentSortBy(enum.Enum):
    """An experiment field to sort `list_experiments` by (Determined's values)."""

    ID = "SORT_BY_ID"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    NUM_TRIALS = "SORT_BY_NUM_TRIALS"
    PROGRESS = "SORT_BY_PROGRESS"
    USER = "SORT_BY_USER"
    NAME = "SORT_BY_NAME"
    FORKED_FROM = "SORT_BY_FORKED_FROM"
    RESOURCE_POOL = "SORT_BY_RESOURCE_POOL"
    PROJECT_ID = "SORT_BY_PROJECT_ID"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    CHECKPOINT_COUNT = "SORT_BY_CHECKPOINT_COUNT"
    SEARCHER_METRIC_VAL = "SORT_BY_SEARCHER_METRIC_VAL"


class ExperimentOrderBy(enum.Enum):
    """Deprecated in Determined in favour of `OrderBy`; the same values."""

    ASCENDING = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"


# The experiment fields each sort reads; USER, RESOURCE_POOL and PROJECT_ID are one value for
# every experiment of this master (one user, one pool, one project), so they keep id order.
_EXPERIMENT_SORT_FIELDS: dict[ExperimentSortBy, str | None] = {
    ExperimentSortBy.ID: "id",
    ExperimentSortBy.DESCRIPTION: "description",
    ExperimentSortBy.START_TIME: "start_time",
    ExperimentSortBy.END_TIME: "end_time",
    ExperimentSortBy.STATE: "state",
    ExperimentSortBy.NUM_TRIALS: "num_trials",
    ExperimentSortBy.PROGRESS: "progress",
    ExperimentSortBy.USER: None,
    ExperimentSortBy.NAME: "name",
    ExperimentSortBy.FORKED_FROM: "parent_id",
    ExperimentSortBy.RESOURCE_POOL: None,
    ExperimentSortBy.PROJECT_ID: None,
}


class Experiment(ExperimentReads, ExperimentEdits):
    """An experiment, as the master knows it.

    Usually obtained from `client.create_experiment(...)` or `client.get_experiment(id)`.

    Attributes:
        id: the experiment's id.
        config: its expanded config (read from the master on first use when the object came
            from a list).
        state: an `ExperimentState`.
        archived: whether it is archived.
        name: its name.
        progress: 0.0 .. 1.0.
        description: its description.
        notes: its notes (empty until set).
        labels: its labels as a set, None when it has none.
        project_id, workspace_id: its project and that project's workspace.
        username: its owner's name.
        searcher: `{name, metric, smaller_is_better}` (ours).
        num_trials, start_time, end_time, best_validation, parent_id: as the master reports
            them (ours).

    All attributes are cached; `reload()` reads them again, and `wait()` and the actions
    update `state`.
    """

    def __init__(self, experiment_id: int, session: api.Session) -> None:
        """An experiment by id; its attributes stay None until `reload()`.

        Args:
            experiment_id: the experiment's id.
            session: a session to the master.
        """
        self._id = experiment_id
        self._session = session
        self._config: dict[str, Any] | None = None
        self.state: ExperimentState | None = None
        self.labels: set[str] | None = None
        self.archived: bool | None = None
        self.name: str | None = None
        self.progress: float | None = None
        self.description: str | None = None
        self.notes: str | None = None
        self.project_id: int | None = None
        self.workspace_id: int | None = None
        self.username: str | None = None
        self.searcher: dict[str, Any] = {}
        self.num_trials: int | None = None
        self.start_time: str | None = None
        self.end_time: str | None = None
        self.best_validation: Any = None
        self.parent_id: int | None = None

    @property
    def id(self) -> int:
        """The experiment's id."""
        return self._id

    @property
    def config(self) -> dict[str, Any] | None:
        """The expanded config; read from the master when not known yet.

        Raises:
            determined.common.api.errors.NotFoundException: the experiment is gone.
        """
        if self._config is None:
            self.reload()
        return self._config

    @config.setter
    def config(self, value: dict[str, Any] | None) -> None:
        self._config = value

    def _hydrate(self, experiment: dict) -> None:
        if experiment.get("config") is not None:
            self._config = dict(experiment["config"])
        self.state = ExperimentState(_util.state_value(_util.determined_state(experiment)))
        self.archived = bool(experiment.get("archived"))
        self.name = experiment.get("name")
        self.progress = experiment.get("progress")
        self.description = experiment.get("description")
        self.notes = experiment.get("notes")
        self.labels = set(experiment["labels"]) if experiment.get("labels") else None
        self.searcher = dict(experiment.get("searcher") or {})
        self.num_trials = experiment.get("num_trials")
        self.start_time = experiment.get("start_time")
        self.end_time = experiment.get("end_time")
        self.best_validation = experiment.get("best_validation")
        self.parent_id = experiment.get("parent_id")
        self.project_id = experiment.get("projectId")
        self.workspace_id = experiment.get("workspaceId")
        self.username = experiment.get("username")

    @classmethod
    def _from_json(cls, experiment: dict, session: api.Session) -> Experiment:
        made = cls(int(experiment["id"]), session)
        made._hydrate(experiment)
        return made

    def reload(self) -> None:
        """Read the experiment's attributes (config included) from the master again.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        self._hydrate(self._session.get(f"/experiments/{self._id}")["experiment"])

    # -- actions -----------------------------------------------------------------------------

    def _act(self, action: str) -> None:
        self._hydrate(self._session.post(f"/experiments/{self._id}/{action}")["experiment"])

    def activate(self) -> None:
        """Activate (resume) the experiment.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: its state does not allow it (409).
        """
        self._act("activate")

    def pause(self) -> None:
        """Pause the experiment: its running trials checkpoint and stop until `activate()`.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: its state does not allow it (409).
        """
        self._act("pause")

    def cancel(self) -> None:
        """Cancel the experiment: its trials stop gracefully and it ends CANCELED.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: its state does not allow it (409).
        """
        self._act("cancel")

    def kill(self) -> None:
        """Kill the experiment: its trials are killed at once and it ends CANCELED.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: its state does not allow it (409).
        """
        self._act("kill")

    def archive(self) -> None:
        """Archive the experiment (hidden from default lists; it must be terminal).

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: its state does not allow it (409).
        """
        self._act("archive")

    def unarchive(self) -> None:
        """Unarchive the experiment.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id.
            determined.common.api.errors.APIException: its state does not allow it (409).
        """
        self._act("unarchive")

    def wait(self, interval: float = 5.0) -> ExperimentState:
        """Wait until the experiment reaches a terminal state (COMPLETED, CANCELED, ERROR).

        Args:
            interval: seconds between asking the master.

        Returns:
            The terminal state.

        Raises:
            ValueError: the experiment is PAUSED (it would never end; as in Determined).
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        elapsed = 0.0
        next_note = 60.0
        while True:
            self.reload()
            if self.state in TERMINAL_STATES:
                assert self.state is not None
                return self.state
            if self.state == ExperimentState.PAUSED:
                raise ValueError(
                    f"Experiment {self.id} is in paused state. Make sure the experiment is active."
                )
            time.sleep(interval)
            elapsed += interval
            if elapsed >= next_note:
                print(
                    f"Waiting for Experiment {self.id} to complete. "
                    f"Elapsed {elapsed / 60:.1f} minutes",
                    file=sys.stderr,
                )
                next_note += 60.0

    def await_first_trial(self, interval: float = 0.1) -> trial.Trial:
        """Wait until the experiment has a trial.

        Args:
            interval: seconds between asking the master.

        Returns:
            The first trial (lowest id).

        Raises:
            RuntimeError: the experiment ended without a trial.
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        while True:
            self.reload()
            page = self._session.get(f"/experiments/{self._id}/trials", {"limit": 1})
            if page["trials"]:
                return trial.Trial._from_json(page["trials"][0], self._session)
            if self.state in TERMINAL_STATES:
                raise RuntimeError(
                    "This experiment has terminated before a trial was started."
                    f" Experiment is in state {self.state}."
                )
            time.sleep(interval)

    # -- code --------------------------------------------------------------------------------

    def download_code(self, output_dir: str | None = None) -> str:
        """Save the experiment's uploaded code (its context) as `exp-<id>_model_def.tar.gz`.

        Args:
            output_dir: the directory (created); default the current directory.

        Returns:
            The path of the file.

        Raises:
            determined.common.api.errors.NotFoundException: no experiment has this id, or it
                was created without a context.
        """
        data = self._session.get_bytes(f"/experiments/{self._id}/context")
        name = f"exp-{self.id}_model_def.tar.gz"
        if output_dir:
            directory = pathlib.Path(output_dir).expanduser()
            directory.mkdir(parents=True, exist_ok=True)
            target = directory / name
        else:
            target = pathlib.Path(name)
        target.write_bytes(data)
        return str(target)

    def get_pachyderm_config(self) -> dict[str, Any]:
        """The config's `integrations.pachyderm` section.

        Returns:
            The section as a dict.

        Raises:
            ValueError: the config has none.
        """
        try:
            section = (self.config or {})["integrations"]["pachyderm"]
        except (KeyError, TypeError):
            section = None
        if not section:
            raise ValueError(f"No Pachyderm configuration found for experiment {self.id}.")
        return dict(section)

    def __repr__(self) -> str:
        return f"Experiment(id={self.id})"


def list_experiment_answers(
    session: api.Session,
    *,
    sort_by: ExperimentSortBy | None,
    order_by: OrderBy | None,
    experiment_ids: list[int] | None,
    labels: list[str] | None,
    states: list[ExperimentState] | None,
    name: str | None,
    archived: bool | None,
    users: list[str] | None = None,
    project_id: int | None = None,
) -> list[dict]:
    """The experiments (API objects) matching Determined's `list_experiments` filters, sorted.

    Args:
        session: a session to the master.
        sort_by: the field (default id).
        order_by: the direction (default ascending).
        experiment_ids: only these ids.
        labels: only experiments with a label in this list.
        states: only experiments in these states.
        name: only names containing this.
        archived: only (un)archived ones; None for both.
        users: only these owners' (usernames); project_id: only this project's.

    Returns:
        The matching experiments' API objects.

    Raises:
        NotImplementedError: a sort this master has no data for (CHECKPOINT_SIZE,
            CHECKPOINT_COUNT).
    """
    params: dict[str, Any] = {"name": name or None}
    if archived is not None:
        params["archived"] = "true" if archived else "false"
    if users is not None:
        if not users:
            return []  # no owner asked for: none matches
        params["users"] = ",".join(users)
    if project_id is not None:
        params["projectId"] = int(project_id)
    wanted_states = {_util.master_state(s) for s in states} if states else None
    if wanted_states is not None and "ACTIVE" in wanted_states:
        wanted_states |= {"QUEUED", "RUNNING"}  # ACTIVE asks for every active experiment
    master_states = (
        {
            "ACTIVE" if s in ("QUEUED", "PULLING", "STARTING", "RUNNING") else s
            for s in wanted_states
        }
        if wanted_states is not None
        else None
    )
    if master_states is not None and len(master_states) == 1:
        params["state"] = next(iter(master_states))
    found = [
        e
        for e in session.get("/experiments", params)["experiments"]
        if (wanted_states is None or _util.determined_state(e) in wanted_states)
        and (experiment_ids is None or int(e["id"]) in experiment_ids)
        and (labels is None or set(labels) & set(e.get("labels") or []))
    ]
    sort_by = sort_by or ExperimentSortBy.ID
    descending = order_by is not None and order_by.value == OrderBy.DESC.value
    if sort_by == ExperimentSortBy.SEARCHER_METRIC_VAL:

        def value(e: dict) -> Any:
            best = e.get("best_validation")
            return best if isinstance(best, (int, float)) else None

    elif sort_by in _EXPERIMENT_SORT_FIELDS:
        field = _EXPERIMENT_SORT_FIELDS[sort_by] or "id"

        def value(e: dict) -> Any:
            return e.get(field)

    else:
        raise NotImplementedError(
            f"list_experiments(sort_by={sort_by}): this master has no such data"
        )
    return sorted(
        found, key=lambda e: _util.sort_key_nulls_last(value(e), descending), reverse=descending
    )
