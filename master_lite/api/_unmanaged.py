"""Runs that train in a Jupyter kernel (core_v2, unmanaged): open or resume, heartbeat, logs,
close. Their metrics and checkpoints go through the ordinary trial endpoints with the run's
token (docs/rest-api.md, "Unmanaged runs")."""

from __future__ import annotations

from master_lite._core import _limits
from master_lite.api._base import ApiHandlerMixin
from master_lite.api._declarations import Operation, Owner, Route, TrialScope
from master_lite.api._openapi import BOOLEAN, INTEGER, NUMBER, OBJECT, STRING, array, nullable, obj
from master_lite.api._schemas import LABELS, TRIAL_ANSWER, TRIAL_ID


class UnmanagedRunsHandler(ApiHandlerMixin):
    async def post(self) -> None:
        # The run's experiment is the caller's; another's run resumes for its owner or an admin.
        admin = bool(getattr(self.principal, "admin", False))
        self.send_json(
            self.master.unmanaged.open_run(self.body, owner_id=self.owner_id(), admin=admin)
        )


class UnmanagedHeartbeatHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        self.send_json(self.master.unmanaged.heartbeat(trial_id))


class UnmanagedLogsHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        await self.master.before_report()
        self.send_json({"accepted": self.master.unmanaged.append_logs(trial_id, self.body["logs"])})


class UnmanagedCloseHandler(ApiHandlerMixin):
    async def post(self, trial_id: int) -> None:
        trial = self.master.unmanaged.close_run(
            trial_id, self.body["state"], self.body.get("message")
        )
        self.send_json({"trial": trial})


OPEN_BODY = obj(
    [],
    name={**STRING, "maxLength": _limits.MAX_NAME_CHARS},
    hparams=OBJECT,
    searcher=OBJECT,
    checkpoint_storage=OBJECT,
    description={**STRING, "maxLength": _limits.MAX_DESCRIPTION_CHARS},
    labels=LABELS,
    data=OBJECT,
    workspace=nullable({**STRING, "description": "with project: where its experiment goes"}),
    project=nullable(STRING),
    external_experiment_id=nullable(STRING),
    external_trial_id=nullable(STRING),
    lease_seconds={**NUMBER, "description": "end the trial as ERROR after this long silent"},
    host={**STRING, "description": "where the kernel runs, shown to people"},
)
OPEN_ANSWER = obj(
    ["experiment_id", "trial_id", "token", "resumed"],
    experiment_id=INTEGER,
    trial_id=INTEGER,
    trial_run_id=INTEGER,
    token={**STRING, "description": "authorizes this trial's reports while it is live"},
    resumed=BOOLEAN,
    external_experiment_id=STRING,
    external_trial_id=STRING,
    hparams=OBJECT,
    trial_seed=INTEGER,
    steps_completed=INTEGER,
    latest_checkpoint=nullable(STRING),
    lease_seconds=NUMBER,
    config=OBJECT,
)

UNMANAGED_ROUTES: tuple[Route, ...] = (
    Route(
        "/unmanaged/runs",
        UnmanagedRunsHandler,
        {
            "post": Operation(
                "Open a run that trains in a kernel, or resume it by its external ids",
                OPEN_ANSWER,
                request=OPEN_BODY,
            )
        },
    ),
    Route(
        "/unmanaged/trials/{trial_id}/heartbeat",
        UnmanagedHeartbeatHandler,
        {
            "post": Operation(
                "Renew the run's lease (409 once the trial ended)",
                obj(["lease_expires"], lease_expires=NUMBER),
                trial_scope=TrialScope.TRIAL,
                owner=Owner.TRIAL,  # a user token: the trial's owner or an admin
                verb="report to",
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/unmanaged/trials/{trial_id}/logs",
        UnmanagedLogsHandler,
        {
            "post": Operation(
                "Store lines the kernel printed while the run was open",
                obj(["accepted"], accepted=INTEGER),
                trial_scope=TrialScope.TRIAL,
                owner=Owner.TRIAL,  # a user token: the trial's owner or an admin
                verb="report to",
                max_body_bytes=_limits.MAX_LOG_POST_BYTES,
                description=f"413 for a body over {_limits.MAX_LOG_POST_BYTES} bytes; a line "
                f"over {_limits.MAX_LOG_LINE_BYTES} bytes is stored truncated, with a marker",
                request=obj(
                    ["logs"],
                    logs=array(
                        obj(
                            ["line"],
                            line=STRING,
                            stream={**STRING, "enum": ["stdout", "stderr"]},
                            time={
                                **NUMBER,
                                "description": "seconds since the epoch, 0 to 253402300799 "
                                "(400 otherwise); left out: when the line arrives",
                            },
                        )
                    ),
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/unmanaged/trials/{trial_id}/close",
        UnmanagedCloseHandler,
        {
            "post": Operation(
                "End the run: its trial becomes COMPLETED, CANCELED or ERROR",
                TRIAL_ANSWER,
                trial_scope=TrialScope.TRIAL,
                owner=Owner.TRIAL,  # a user token: the trial's owner or an admin
                verb="report to",
                request=obj(
                    ["state"],
                    state={**STRING, "enum": ["COMPLETED", "CANCELED", "ERROR"]},
                    message=nullable(STRING),
                ),
            )
        },
        (TRIAL_ID,),
    ),
)
