"""`core_context.searcher`: train to the lengths the master's searcher asks for (≤0.37 form).

The chief long-polls `GET /trials/{id}/searcher/operation`; each op's `length` is an absolute
target (train until your total reaches it, validate, then `op.report_completed(metric)`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator
from typing import Any

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
    """One "train to `length`, then validate" request from the master's searcher.

    `length` is absolute, not incremental: ops of length 10 then 20 mean "train until 10 units
    in total, validate; then until 20 in total, validate". The unit is the one of the config's
    `searcher.max_length` (see `SearcherContext.get_configured_units()`).
    """

    # Set by `SearcherContext`: tells the preempt context a report was made. A class default
    # too, for subclasses that skip `__init__`.
    _on_report: Callable[[], None] | None = None

    def __init__(self, session: Any, trial_id: int, length: int, is_chief: bool) -> None:
        self._session = session
        self._trial_id = trial_id
        self._length = length
        self._is_chief = is_chief
        self._completed = False
        self._on_report = None

    @property
    def length(self) -> int:
        """The total amount of training to reach before validating and `report_completed()`."""
        return self._length

    def report_progress(self, length: float) -> None:
        """Report how far training towards this op's `length` has got (for the progress bar).

        Args:
            length: the training done so far, in the unit of `length` (not a fraction).

        Raises:
            RuntimeError: called on a rank other than the chief, or after `report_completed()`
                with a value other than `length`.
        """
        if not self._is_chief:
            raise RuntimeError("op.report_progress() may only be called by the chief (rank 0)")
        if self._completed and length != self._length:
            raise RuntimeError(
                "op.report_progress() after op.report_completed() must equal op.length"
            )
        if self._on_report is not None:
            self._on_report()
        self._send_progress(length)

    def _send_progress(self, length: float) -> None:
        fraction = min(1.0, max(0.0, float(length) / self._length)) if self._length else 1.0
        logger.debug("op.report_progress(%s) -> %.4f", length, fraction)
        self._session.post(
            f"/trials/{self._trial_id}/progress", {"progress": fraction, "is_raw": True}
        )

    def report_completed(self, searcher_metric: Any) -> None:
        """Finish this op: training reached `length` and was validated.

        Args:
            searcher_metric: the value of the experiment's `searcher.metric` at `length`
                (usually a float; numpy and tensor scalars are converted).

        Raises:
            RuntimeError: called on a rank other than the chief, or twice for one op.
        """
        if not self._is_chief:
            raise RuntimeError("op.report_completed() may only be called by the chief (rank 0)")
        if self._completed:
            raise RuntimeError("op.report_completed() may only be called once per operation")
        self._completed = True
        if self._on_report is not None:
            self._on_report()
        self._send_completed(searcher_metric)

    def _send_completed(self, searcher_metric: Any) -> None:
        body = {"op": {"length": self._length}, "searcherMetric": _metric_value(searcher_metric)}
        self._session.post(f"/trials/{self._trial_id}/searcher/completed_operation", body)


def _metric_value(metric: Any) -> Any:
    if isinstance(metric, (int, float)) and not isinstance(metric, bool):
        return float(metric)
    item = getattr(metric, "item", None)
    return float(item()) if callable(item) else metric


class SearcherContext:
    """`core_context.searcher`: the operations the master's searcher asks this trial to run.

    Built by `det.core.init()`; users do not construct it. `on_out_of_ops` is called when the
    searcher has no more operations for the trial (`det.core.init()` passes the preempt
    context's `acknowledge_preemption_signal`).
    """

    _on_report: Callable[[], None] | None = None  # a class default too, as the op's

    def __init__(
        self,
        session: Any,
        distributed: Any,
        trial_id: int,
        config: dict,
        on_out_of_ops: Any = None,
        *,
        poll_s: int = OPERATION_POLL_S,
        on_report: Callable[[], None] | None = None,
    ) -> None:
        self._session = session
        self._distributed = distributed
        self._trial_id = trial_id
        self._config = config
        self._on_out_of_ops = on_out_of_ops
        self._poll_s = poll_s
        # Called on each op report (`det.core.init()` passes the preempt context's `_on_report`,
        # which notes once a stop request the loop does not check).
        self._on_report = on_report

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

    def _lengths(self) -> Iterator[int]:
        """The chief's op lengths, in order, until the searcher has no more for this trial."""
        while True:
            length = self._next_length()
            if length is None:
                return
            yield length

    def _operation(self, length: int, is_chief: bool) -> SearcherOperation:
        return SearcherOperation(self._session, self._trial_id, length, is_chief=is_chief)

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        """Iterate over the searcher's operations for this trial; each must be completed.

        The chief asks the master for the next op (waiting while the searcher decides).

        Args:
            searcher_mode: `WorkersAskChief` (default): every rank iterates in step and receives
                the chief's ops (a synchronization point). `ChiefOnly`: only the chief iterates;
                tell the workers what to do yourself.
            auto_ack: when the ops run out, tell the master (on the chief) that this process
                exits without the trial being finished for good, so the trial is started again
                if the searcher later has more ops (e.g. an ASHA promotion).

        Yields:
            `SearcherOperation`s with increasing `length`; the chief must call
            `op.report_completed()` on each before asking for the next.

        Raises:
            RuntimeError: iterated on a non-chief rank with `SearcherMode.ChiefOnly`, or the
                chief asked for the next op without completing the previous one.
            ValueError: `searcher_mode` is not a `SearcherMode`.
        """
        searcher_mode = SearcherMode(searcher_mode)
        rank = self._distributed.rank
        if searcher_mode is SearcherMode.ChiefOnly and rank != 0:
            raise RuntimeError(
                f"searcher.operations() on rank {rank} with SearcherMode.ChiefOnly: only the chief may iterate"
            )
        chief = rank == 0
        lengths = self._lengths() if chief else None
        while True:
            length = next(lengths, None) if lengths is not None else None
            if searcher_mode is SearcherMode.WorkersAskChief:
                length = self._distributed.broadcast(length)
            if length is None:
                break
            op = self._operation(length, is_chief=chief)
            op._on_report = self._on_report
            yield op
            if chief and not op._completed:
                raise RuntimeError("you must call op.report_completed() on each operation")
        if chief and auto_ack:
            self.acknowledge_out_of_ops()

    def acknowledge_out_of_ops(self) -> None:
        """Tell the master this process exits because the searcher had no more ops for it.

        The trial is not finished for good: if the searcher later hands out more ops (an ASHA
        promotion), the master starts it again. `operations(auto_ack=True)` calls this itself.
        """
        if self._on_out_of_ops is not None:
            self._on_out_of_ops()

    def get_configured_units(self) -> Unit | None:
        """The unit of the config's `searcher.max_length`, which op lengths are counted in.

        Returns:
            `Unit.BATCHES`, `Unit.RECORDS` or `Unit.EPOCHS` for e.g. `max_length: {epochs: 5}`;
            None when the length has no unit (`max_length: 5`).
        """
        return configured_units(self._config)


class DummySearcherOperation(SearcherOperation):
    """Off the master: the op's reports are only logged."""

    def __init__(self, length: int, is_chief: bool) -> None:
        super().__init__(session=None, trial_id=0, length=length, is_chief=is_chief)

    def _send_progress(self, length: float) -> None:
        logger.info("op.report_progress(%s)", length)

    def _send_completed(self, searcher_metric: Any) -> None:
        logger.info("op.report_completed(%s)", searcher_metric)


class DummySearcherContext(SearcherContext):
    """Off the master: exactly one operation of length 1 (Determined's behaviour)."""

    def __init__(self, distributed: Any, length: int = 1) -> None:
        # No session, trial or config: the ops come from `_lengths`, the units are fixed.
        super().__init__(session=None, distributed=distributed, trial_id=0, config={})
        self._length = length

    def _lengths(self) -> Iterator[int]:
        yield self._length

    def _operation(self, length: int, is_chief: bool) -> SearcherOperation:
        return DummySearcherOperation(length, is_chief=is_chief)

    def get_configured_units(self) -> Unit:
        return Unit.EPOCHS


class SearcherContextMissing(SearcherContext):
    """Stands in where there is no searcher (non-trial tasks); every use explains why."""

    def __init__(self) -> None:
        pass  # nothing to hold: every method fails

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(
            "core_context.searcher is not available in this task: searcher operations exist only "
            "in trials started by the master"
        )

    operations = acknowledge_out_of_ops = get_configured_units = _fail
