"""Experiment endpoints: create, list, read, actions, and the searcher's best metric."""
from __future__ import annotations

from master_lite.api._base import ApiError, ApiHandlerMixin, decode_base64


class ExperimentsHandler(ApiHandlerMixin):
    async def get(self) -> None:
        experiments = self.master.list_experiments(
            state=self.args["state"], name=self.args["name"], archived=self.args["archived"])
        self.send_json({"experiments": experiments})

    async def post(self) -> None:
        body = self.body
        context = None
        if body.get("context") is not None:
            context = decode_base64(body["context"], "body.context")
        experiment = self.master.create_experiment(
            body["config"], context, activate=body.get("activate", True),
            archived=body.get("archived", False), notebook=body.get("notebook"))
        self.send_json({"experiment": experiment}, status=201)


class ExperimentHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        experiment = dict(self.master.get_experiment(experiment_id))
        # The list view leaves the (large) expanded config out; the detail view adds it.
        if "config" not in experiment:
            experiment["config"] = self.master.get_experiment_config(experiment_id)
        self.send_json({"experiment": experiment,
                        "trials": self.master.list_trials(experiment_id)})


class ExperimentTrialsHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        self.send_json({"trials": self.master.list_trials(experiment_id)})


class ExperimentCheckpointsHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        checkpoints = self.master.list_checkpoints(experiment_id=experiment_id,
                                                   state=self.args["state"])
        self.send_json({"checkpoints": checkpoints})


class ExperimentContextHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        data = self.master.get_experiment_context(experiment_id)
        await self.send_bytes(data, "application/gzip",
                              f"experiment-{experiment_id}-context.tar.gz")


class ExperimentMetricsHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        metrics = self.master.get_metrics(experiment_id=experiment_id, group=self.args["group"],
                                          after_id=self.args["after_id"],
                                          limit=self.args["limit"])
        self.send_json({"metrics": metrics})


class ExperimentActionHandler(ApiHandlerMixin):
    async def post(self, experiment_id: int, action: str) -> None:
        self.send_json({"experiment": self.master.experiment_action(experiment_id, action)})


class BestValidationHandler(ApiHandlerMixin):
    async def get(self, experiment_id: int) -> None:
        metric = self.master.best_validation(experiment_id)
        if metric is None:
            raise ApiError(404, f"experiment {experiment_id} has no validation metric yet")
        self.send_json({"metric": metric})
