"""TensorBoard endpoints: start one on experiments' and trials' metrics, list, stop.

`_routes.py` joins `TENSORBOARD_ROUTES` into the one route table.
"""

from __future__ import annotations

from master_lite.api._base import ApiHandlerMixin
from master_lite.api._declarations import Listing, Operation, Owner, PathParam, Route
from master_lite.api._openapi import INTEGER, STRING, array, nullable, obj, ref
from master_lite.api._parsing import SQLITE_INT_MAX
from master_lite.api._reads import check_readable

TENSORBOARD_ID = PathParam("tensorboard_id", r"[0-9a-f-]+", STRING, str, "TensorBoard id")
TENSORBOARD_ANSWER = obj(["tensorboard"], tensorboard=ref("TensorBoard"))
IDS = nullable(array({**INTEGER, "minimum": 1, "maximum": SQLITE_INT_MAX}))


class TensorboardsHandler(ApiHandlerMixin):
    async def get(self) -> None:
        self.send_json({"tensorboards": self.master.tensorboards.list_all()})

    async def post(self) -> None:
        # read_access "own": only experiments and trials the user may read (else 404).
        check_readable(
            self.master, self.principal, "experiment", self.body.get("experiment_ids") or []
        )
        check_readable(self.master, self.principal, "trial", self.body.get("trial_ids") or [])
        board = await self.master.tensorboards.start(
            self.body.get("experiment_ids") or [],
            self.body.get("trial_ids") or [],
            owner_id=self.owner_id(),
        )
        self.send_json({"tensorboard": board}, status=201)


class TensorboardHandler(ApiHandlerMixin):
    async def get(self, tensorboard_id: str) -> None:
        self.send_json({"tensorboard": self.master.tensorboards.get(tensorboard_id)})


class TensorboardKillHandler(ApiHandlerMixin):
    async def post(self, tensorboard_id: str) -> None:
        self.send_json({"tensorboard": await self.master.tensorboards.kill(tensorboard_id)})


TENSORBOARD_ROUTES: tuple[Route, ...] = (
    Route(
        "/tensorboards",
        TensorboardsHandler,
        {
            "get": Operation(
                "The running TensorBoards, oldest first",
                obj(["tensorboards"], tensorboards=array(ref("TensorBoard"))),
                reads=Listing("tensorboards", "tensorboard"),
            ),
            "post": Operation(
                "Start a TensorBoard on the metrics of experiments' trials and of trials",
                TENSORBOARD_ANSWER,
                status=201,
                request=obj(experiment_ids=IDS, trial_ids=IDS),
                description="STATE_STARTING at first, STATE_RUNNING once it serves (poll GET "
                "/tensorboards/{id}); 400 without ids or when finished trials have nothing to "
                "show, 404 for an unknown experiment or trial, 409 when it was killed before it "
                "served, 503 when the tensorboard package is not installed beside the master",
            ),
        },
    ),
    Route(
        "/tensorboards/{tensorboard_id}",
        TensorboardHandler,
        {"get": Operation("One TensorBoard", TENSORBOARD_ANSWER)},
        (TENSORBOARD_ID,),
    ),
    Route(
        "/tensorboards/{tensorboard_id}/kill",
        TensorboardKillHandler,
        {
            "post": Operation(
                "Stop a TensorBoard (its process and its log directory): who launched it, "
                "or an admin",
                TENSORBOARD_ANSWER,
                description="answers once the process exited, with state STATE_TERMINATED",
                owner=Owner.TENSORBOARD,
                verb="kill",
            )
        },
        (TENSORBOARD_ID,),
    ),
)
