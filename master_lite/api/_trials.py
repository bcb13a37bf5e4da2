"""Trial endpoints: reads for people, and the reports a trial process sends about itself."""

from __future__ import annotations

from typing import Any

from master_lite._core import MetricsQuery
from master_lite.api._base import ApiError, ApiHandlerMixin
from master_lite.api._experiments import strict_metrics_json


class TrialHandler(ApiHandlerMixin):
    async def get(self, trial_id: int) -> None:
        self.send_json({"trial": self.master.views.get_trial(trial_id)})


class TrialRerunHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        body = self.body or {}
        experiment = await self.master.forks.from_trial(
            trial_id,
            continue_from_checkpoint=False,
            max_length=body.get("max_length"),
            activate=body.get("activate", True),
            owner_id=self.owner_id(),
        )
        self.send_json({"experiment": experiment}, status=201)


class TrialContinueHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        body = self.body or {}
        experiment = await self.master.forks.from_trial(
            trial_id,
            continue_from_checkpoint=True,
            max_length=body.get("max_length"),
            activate=body.get("activate", True),
            owner_id=self.owner_id(),
        )
        self.send_json({"experiment": experiment}, status=201)


class TrialNotebookHandler(ApiHandlerMixin):
    async def get(self, trial_id: int) -> None:
        name, data = self.master.views.trial_notebook(trial_id)
        await self.send_bytes(data, "application/x-ipynb+json", name)


class TrialKernelHandler(ApiHandlerMixin):
    async def get(self, trial_id: int) -> None:
        self.send_json(self.master.runs.trial_kernel(trial_id))


class TrialKillHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        self.send_json({"trial": self.master.experiments.kill_trial(trial_id)})


def metric_reports(trial_id: int, body: dict) -> list[dict]:
    """Both accepted body forms as the facade's list of reports.

    Determined's harness sends one report in its own shape; our harness batches several.
    """
    if "reports" in body:
        return [dict(report) for report in body["reports"]]
    if "group" not in body or "metrics" not in body:
        raise ApiError(
            400,
            "body: send either {reports: [...]} or Determined's "
            "{group, metrics: {trialId, trialRunId, stepsCompleted, metrics}}",
        )
    inner = body["metrics"]
    if inner.get("trialId") is not None and int(inner["trialId"]) != trial_id:
        raise ApiError(
            400,
            f"body.metrics.trialId: {inner['trialId']} does not match trial {trial_id} in the path",
        )
    report: dict[str, Any] = {
        "group": body["group"],
        "steps_completed": inner["stepsCompleted"],
        "metrics": (inner.get("metrics") or {}).get("avgMetrics") or {},
    }
    batch_metrics = (inner.get("metrics") or {}).get("batchMetrics")
    if batch_metrics is not None:
        report["batch_metrics"] = batch_metrics
    if inner.get("reportTime") is not None:
        report["report_time"] = inner["reportTime"]
    if inner.get("trialRunId") is not None:
        report["trial_run_id"] = inner["trialRunId"]
    return [report]


class TrialMetricsHandler(ApiHandlerMixin):
    async def get(self, trial_id: int) -> None:
        query = MetricsQuery(
            trial_id=trial_id,
            group=self.args["group"],
            after_id=self.args["after_id"],
            limit=self.args["limit"],
            max_datapoints=self.args["max_datapoints"],
        )
        self.send_json_text(await self.read(strict_metrics_json, self.master.views, query))

    async def post(self, trial_id: int) -> None:
        await self.master.before_report()
        # An ended unmanaged trial takes no more reports (409, as its logs and heartbeats).
        self.master.unmanaged.check_reportable(trial_id)
        accepted = self.master.reports.report_metrics(trial_id, metric_reports(trial_id, self.body))
        # How long the master took over this report, from reading its headers to the commit
        # done, waits behind other requests included (soak/soak_load.py splits report latency
        # into the master's share and the rest with it).
        self.set_header("Server-Timing", f"master;dur={self.request.request_time() * 1000:.2f}")
        self.send_json({"accepted": accepted})


class TrialLogsHandler(ApiHandlerMixin):
    async def get(self, trial_id: int) -> None:
        logs = self.master.logs.get_logs(
            trial_id,
            after_id=self.args["after_id"],
            limit=self.args["limit"],
            tail=self.args["tail"],
            rank=self.args["rank"],
            stream=self.args["stream"],
        )
        self.send_json({"logs": logs})


class TrialProgressHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        self.master.reports.report_progress(trial_id, float(self.body["progress"]))
        self.send_json({})


class RunnerMetadataHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        self.master.reports.set_runner_state(trial_id, self.body["state"])
        self.send_json({})


class EarlyExitHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        self.master.reports.report_early_exit(trial_id, self.body["reason"])
        self.send_json({})


class SearcherOperationHandler(ApiHandlerMixin):
    async def get(self, trial_id: int) -> None:
        answer = await self.call(
            self.master.reports.next_operation, trial_id, self.args["timeout_seconds"]
        )
        self.send_json(answer)


class CompletedOperationHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        length = int(self.body["op"]["length"])
        self.master.reports.complete_operation(trial_id, length, self.body.get("searcherMetric"))
        self.send_json({})
