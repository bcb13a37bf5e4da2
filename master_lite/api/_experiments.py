"""Experiment endpoints: create, list, read, actions, and the searcher's best metric."""

from __future__ import annotations

from typing import Any

from master_lite._core import MetricsQuery, strict_json_text
from master_lite.api._base import ApiError, ApiHandlerMixin, decode_base64, encode_json
from master_lite.api._permissions import check_owner
from master_lite.api._reads import check_readable

MAX_TRIAL_IDS = 1000


def given_args(args: dict[str, Any], *names: str) -> dict[str, Any]:
    """The query parameters among `names` the request set. Passed on only when set, so a
    request without them asks the facade exactly what it asked before they existed."""
    return {name: args[name] for name in names if args[name] is not None}


def strict_metrics_json(views: Any, query: MetricsQuery) -> str:
    """`{"metrics": [...]}` from the list's JSON text as the store made it: decoding and
    encoding thousands of reports again would cost more than reading them. Only text holding
    a non-finite metric (Python's NaN/Infinity tokens) is re-encoded, as strict JSON. Run in
    the read pool (`ApiHandlerMixin.read`)."""
    return '{"metrics": ' + strict_json_text(views.get_metrics_json(query)) + "}"


def parse_trial_ids(values: list[str]) -> list[int]:
    """`trial_ids=1,2,3` (already split by the csv parameter) as ints; 400 names the bad one."""
    if len(values) > MAX_TRIAL_IDS:
        raise ApiError(
            400,
            f"query parameter trial_ids: {len(values)} ids, at most "
            f"{MAX_TRIAL_IDS} per request (page through them)",
        )
    ids = []
    for value in values:
        if not (value.isascii() and value.isdigit()) or len(value) > 18:  # no row has more
            raise ApiError(
                400, f"query parameter trial_ids: expected comma-separated trial ids, got {value!r}"
            )
        ids.append(int(value))
    if not ids:
        raise ApiError(
            400, "query parameter trial_ids: no trial id given (leave it out for every trial)"
        )
    return ids


def placed_in(body: dict) -> dict[str, Any]:
    """`project_id` when the body names a project (Determined's `projectId`), else nothing."""
    return {} if body.get("projectId") is None else {"project_id": body["projectId"]}


class ExperimentsHandler(ApiHandlerMixin):
    async def get(self) -> None:
        await self.send_read(
            "experiments",
            self.master.views.list_experiments,
            state=self.args["state"],
            name=self.args["name"],
            archived=self.args["archived"],
            **self._place(),
        )

    def _place(self) -> dict[str, Any]:
        """The project, workspace and owner filters the request set (only those: see
        `given_args`)."""
        place = {"project_id": self.args["projectId"], "workspace_id": self.args["workspaceId"]}
        place["user_ids"] = self._owner_ids()
        return {key: value for key, value in place.items() if value is not None}

    def _owner_ids(self) -> list[int] | None:
        """The owners `users` (names) and `userIds` ask for; None when neither is given.
        Determined's clients repeat a list parameter (`users=a&users=b`), others join it."""
        names = [n for raw in self.get_query_arguments("users") for n in raw.split(",") if n]
        ids = [i for raw in self.get_query_arguments("userIds") for i in raw.split(",") if i]
        if not names and not ids:
            return None
        bad = [i for i in ids if not (i.isascii() and i.isdigit() and len(i) < 19)]
        if bad:
            raise ApiError(400, f"query parameter userIds: expected user ids, got {bad[0]!r}")
        by_name = {name: user_id for user_id, name in self.master.users.names().items()}
        return [int(i) for i in ids] + [by_name[n] for n in names if n in by_name]

    async def post(self) -> None:
        body = self.body
        # read_access "own": only into a project the user may read (else 404).
        check_readable(self.master, self.principal, "project", [body.get("projectId")])
        context = None
        if body.get("context") is not None:
            context = decode_base64(body["context"], "body.context")
        # Awaited: the context is checked and written in a worker thread (the loop serves
        # other requests meanwhile, however many files it has).
        if body.get("parent_id") is not None:
            # A fork (Determined's parentId): without a context, the parent's model definition,
            # so only who may download that code may fork it (the owner or an admin).
            check_owner(self.master, self.principal, "experiment", body["parent_id"], "fork")
            experiment = await self.master.forks.fork(
                body["parent_id"],
                body["config"],
                context,
                activate=body.get("activate", True),
                archived=body.get("archived", False),
                notebook=body.get("notebook"),
                owner_id=self.owner_id(),
                **placed_in(body),
            )
        else:
            experiment = await self.master.experiments.submit_experiment(
                body["config"],
                context,
                activate=body.get("activate", True),
                archived=body.get("archived", False),
                notebook=body.get("notebook"),
                owner_id=self.owner_id(),
                **placed_in(body),
            )
        self.send_json({"experiment": experiment}, status=201)


class ExperimentHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        self.send_json_text(await self.read(self._experiment_with_trials, experiment_id))

    def _experiment_with_trials(self, experiment_id: int) -> str:
        """Run in the read pool: the experiment and its trials from one snapshot, encoded."""
        views = self.master.views
        experiment = dict(views.get_experiment(experiment_id))
        # The list view leaves the (large) expanded config out; the detail view adds it.
        if "config" not in experiment:
            experiment["config"] = views.get_experiment_config(experiment_id)
        return encode_json({"experiment": experiment, "trials": views.list_trials(experiment_id)})

    async def patch(self, experiment_id: int) -> None:
        body = self.body
        experiment = self.master.edits.patch_experiment(
            experiment_id,
            name=body.get("name"),
            description=body.get("description"),
            notes=body.get("notes"),
            labels=body.get("labels"),
            resources=body.get("resources"),
        )
        self.send_json({"experiment": experiment})

    async def delete(self, experiment_id: int) -> None:
        self.send_json(self.master.edits.delete_experiment(experiment_id))


class ExperimentTrialsHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        paging = given_args(self.args, "limit", "offset", "order_by")
        if paging:
            self.send_json(await self.read(self.master.views.trials_page, experiment_id, **paging))
            return
        trials = await self.read(self.master.views.list_trials, experiment_id)
        self.send_json({"trials": trials, "total": len(trials)})


class ExperimentCheckpointsHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        checkpoints = self.master.checkpoints.list_checkpoints(
            experiment_id=experiment_id, state=self.args["state"]
        )
        self.send_json({"checkpoints": checkpoints})


class ExperimentLogsHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        logs = await self.read(
            self.master.logs.get_experiment_logs,
            experiment_id,
            search=self.args["search"],
            after_id=self.args["after_id"],
            limit=self.args["limit"],
            tail=self.args["tail"],
            stream=self.args["stream"],
        )
        self.send_json({"logs": logs})


class ExperimentContextHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        data = self.master.experiments.get_experiment_context(experiment_id)
        await self.send_bytes(
            data, "application/gzip", f"experiment-{experiment_id}-context.tar.gz"
        )


class ExperimentMetricsHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        trial_ids = self.args["trial_ids"]
        query = MetricsQuery(
            experiment_id=experiment_id,
            group=self.args["group"],
            after_id=self.args["after_id"],
            limit=self.args["limit"],
            trial_ids=None if trial_ids is None else tuple(parse_trial_ids(trial_ids)),
            max_datapoints=self.args["max_datapoints"],
        )
        self.send_json_text(await self.read(strict_metrics_json, self.master.views, query))


class ExperimentActionHandler(ApiHandlerMixin):
    async def post(self, experiment_id: int, action: str) -> None:
        self.send_json(
            {"experiment": self.master.experiments.experiment_action(experiment_id, action)}
        )


class BestValidationHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        metric = self.master.views.best_validation(experiment_id)
        if metric is None:
            raise ApiError(404, f"experiment {experiment_id} has no validation metric yet")
        self.send_json({"metric": metric})
