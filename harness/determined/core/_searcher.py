"""`core_context.searcher`: train to the lengths the master's searcher asks for (≤0.37 form).

The chief long-polls `GET /trials/{id}/searcher/operation`; each op's `length` is an absolute
target (train until your total reaches it, validate, then `op.report_completed(metric)`).
"""
from __future__ import annotations

import enum
import logging
from typing import Any, Iterator

logger = logging.getLogger("determined.core")

OPERATION_POLL_S = 60


class SearcherMode(str, enum.Enum):
    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHEIF_ONLY"  # misspelled in Determined; kept for compatibility

    def __str__(self) -> str:
        return self.value


class Unit(enum.Enum):
    EPOCHS = "UNIT_EPOCHS"
    RECORDS = "UNIT_RECORDS"
    BATCHES = "UNIT_BATCHES"


def configured_units(config: dict) -> Unit | None:
    searcher = config.get("searcher") or {}
    unit = searcher.get("unit")
    if isinstance(unit, str) and unit.upper() in Unit.__members__:
        return Unit[unit.upper()]
    length = searcher.get("max_length")
    if isinstance(length, dict) and len(length) == 1:
        (key,) = length
        if key.upper() in Unit.__members__:
            return Unit[key.upper()]
    return None


class SearcherOperation:
    """One "train to `length`, then validate" request from the master's searcher."""

    def __init__(self, session: Any, trial_id: int, length: int, is_chief: bool) -> None:
        self._session = session
        self._trial_id = trial_id
        self._length = length
        self._is_chief = is_chief
        self._completed = False

    @property
    def length(self) -> int:
        return self._length

    def report_progress(self, length: float) -> None:
        if not self._is_chief:
            raise RuntimeError("op.report_progress() may only be called by the chief (rank 0)")
        if self._completed and length != self._length:
            raise RuntimeError("op.report_progress() after op.report_completed() must equal op.length")
        fraction = min(1.0, max(0.0, float(length) / self._length)) if self._length else 1.0
        logger.debug("op.report_progress(%s) -> %.4f", length, fraction)
        self._session.post(f"/trials/{self._trial_id}/progress", {"progress": fraction, "is_raw": True})

    def report_completed(self, searcher_metric: Any) -> None:
        if not self._is_chief:
            raise RuntimeError("op.report_completed() may only be called by the chief (rank 0)")
        if self._completed:
            raise RuntimeError("op.report_completed() may only be called once per operation")
        self._completed = True
        body = {"op": {"length": self._length}, "searcherMetric": _metric_value(searcher_metric)}
        self._session.post(f"/trials/{self._trial_id}/searcher/completed_operation", body)


def _metric_value(metric: Any) -> Any:
    if isinstance(metric, (int, float)) and not isinstance(metric, bool):
        return float(metric)
    item = getattr(metric, "item", None)
    return float(item()) if callable(item) else metric


class SearcherContext:
    def __init__(
        self,
        session: Any,
        distributed: Any,
        trial_id: int,
        config: dict,
        on_out_of_ops: Any = None,
        *,
        poll_s: int = OPERATION_POLL_S,
    ) -> None:
        self._session = session
        self._distributed = distributed
        self._trial_id = trial_id
        self._config = config
        self._on_out_of_ops = on_out_of_ops  # callable posting ack_preemption (the preempt context's)
        self._poll_s = poll_s

    def _next_length(self) -> int | None:
        while True:
            answer = self._session.get(
                f"/trials/{self._trial_id}/searcher/operation",
                params={"timeout_seconds": self._poll_s},
                timeout=self._poll_s + 30,
            )
            if answer.get("completed"):
                return None
            op = answer.get("op")
            if op:
                return int(op["validateAfter"]["length"])

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        searcher_mode = SearcherMode(searcher_mode)
        rank = self._distributed.rank
        if searcher_mode is SearcherMode.ChiefOnly and rank != 0:
            raise RuntimeError(f"searcher.operations() on rank {rank} with SearcherMode.ChiefOnly: only the chief may iterate")
        chief = rank == 0
        while True:
            length = self._next_length() if chief else None
            if searcher_mode is SearcherMode.WorkersAskChief:
                length = self._distributed.broadcast(length)
            if length is None:
                break
            op = SearcherOperation(self._session, self._trial_id, length, is_chief=chief)
            yield op
            if chief and not op._completed:
                raise RuntimeError("you must call op.report_completed() on each operation")
        if chief and auto_ack:
            self.acknowledge_out_of_ops()

    def acknowledge_out_of_ops(self) -> None:
        # Tells the master this process exits without being finished for good: if the searcher
        # later hands out more ops (ASHA promotion), the trial is started again.
        if self._on_out_of_ops is not None:
            self._on_out_of_ops()

    def get_configured_units(self) -> Unit | None:
        return configured_units(self._config)


class DummySearcherOperation:
    def __init__(self, length: int, is_chief: bool) -> None:
        self._length = length
        self._is_chief = is_chief
        self._completed = False

    @property
    def length(self) -> int:
        return self._length

    def report_progress(self, length: float) -> None:
        if not self._is_chief:
            raise RuntimeError("op.report_progress() may only be called by the chief (rank 0)")
        if self._completed and length != self._length:
            raise RuntimeError("op.report_progress() after op.report_completed() must equal op.length")
        logger.info("op.report_progress(%s)", length)

    def report_completed(self, searcher_metric: Any) -> None:
        if not self._is_chief:
            raise RuntimeError("op.report_completed() may only be called by the chief (rank 0)")
        if self._completed:
            raise RuntimeError("op.report_completed() may only be called once per operation")
        self._completed = True
        logger.info("op.report_completed(%s)", searcher_metric)


class DummySearcherContext:
    """Off the master: exactly one operation of length 1 (Determined's behaviour)."""

    def __init__(self, distributed: Any, length: int = 1) -> None:
        self._distributed = distributed
        self._length = length

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[DummySearcherOperation]:
        searcher_mode = SearcherMode(searcher_mode)
        rank = self._distributed.rank
        if searcher_mode is SearcherMode.ChiefOnly and rank != 0:
            raise RuntimeError(f"searcher.operations() on rank {rank} with SearcherMode.ChiefOnly: only the chief may iterate")
        op = DummySearcherOperation(self._length, is_chief=rank == 0)
        yield op
        if rank == 0 and not op._completed:
            raise RuntimeError("you must call op.report_completed() on each operation")

    def acknowledge_out_of_ops(self) -> None:
        pass

    def get_configured_units(self) -> Unit:
        return Unit.EPOCHS


class SearcherContextMissing:
    """Stands in where there is no searcher (non-trial tasks); every use explains why."""

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(
            "core_context.searcher is not available in this task: searcher operations exist only "
            "in trials started by the master"
        )

    operations = acknowledge_out_of_ops = get_configured_units = _fail
