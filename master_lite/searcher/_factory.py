"""From an (expanded) experiment config to a running SearchMethod, and back from a snapshot."""

from __future__ import annotations

import dataclasses
from typing import Any

from determined.common import expconf
from master_lite.searcher._adaptive import (
    Tournament,
    bracket_concurrency,
    bracket_rungs,
    bracket_trials,
)
from master_lite.searcher._asha import PromotionAsha, StoppingAsha
from master_lite.searcher._grid import GridEngine
from master_lite.searcher._hparams import grid_points, leaves
from master_lite.searcher._ops import ExitedReason, Operation, SearchMethod, Shutdown
from master_lite.searcher._random import RandomEngine
from master_lite.searcher._trials import TrialFactory

SNAPSHOT_VERSION = 1
SUPPORTED = ("single", "random", "grid", "async_halving", "adaptive_asha")
LEGACY = ("adaptive", "adaptive_simple", "sync_halving", "pbt", "custom")


def length_units(length: Any, where: str = "searcher.max_length") -> tuple[str | None, int]:
    """``{"batches": 5}`` -> ("batches", 5); ``7`` -> (None, 7): the harness's own parse
    (`determined.common.expconf.length_of`), which trials convert to batches the same way."""
    try:
        return expconf.length_of(length)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


@dataclasses.dataclass(frozen=True)
class SearchPlan:
    """What a config asks for, read once: the searcher's shape before any trial runs."""

    name: str
    metric: str
    smaller_is_better: bool
    unit: str | None  # "batches", a time_metric name, or None for a unitless length
    length: int  # trial length (random/grid) or the top rung target (ASHA)
    time_driven: bool  # 0.38 ASHA: rungs passed by validation reports of `time_metric`
    time_metric: str | None
    stop_once: bool
    divisor: float
    max_concurrent_trials: int
    brackets_rungs: list[int]  # ASHA only
    brackets_trials: list[int]
    brackets_concurrency: list[int]


def _field(searcher: dict[str, Any], key: str, default: Any) -> Any:
    value = searcher.get(key)
    return default if value is None else value


def _positive_int(searcher: dict[str, Any], key: str, example: int) -> int:
    value = searcher.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(
            f"searcher.{key}: required (an int >= 1) when searcher.name is "
            f"{searcher.get('name')!r} (add e.g. {key}: {example}; got {value!r})"
        )
    return value


def read_plan(config: dict[str, Any]) -> SearchPlan:
    searcher = config.get("searcher") or {}
    name = searcher.get("name")
    if name in LEGACY:
        raise ValueError(
            f"searcher.name: {name!r} is a legacy searcher that is no longer supported "
            f"(use one of {', '.join(SUPPORTED)})"
        )
    if name not in SUPPORTED:
        raise ValueError(
            f"searcher.name: {name!r} is not a searcher (use one of {', '.join(SUPPORTED)})"
        )
    mct = _field(searcher, "max_concurrent_trials", 16)
    if not isinstance(mct, int) or mct < 0:
        raise ValueError(
            f"searcher.max_concurrent_trials: expected an int >= 0 (0 = no limit), got {mct!r}"
        )
    unit: str | None = None
    length = 1  # a Core API script that never asks for operations never sees it
    if searcher.get("max_length") is not None:
        unit, length = length_units(searcher["max_length"])
    common = dict(
        name=name,
        metric=searcher.get("metric") or "",
        smaller_is_better=bool(_field(searcher, "smaller_is_better", True)),
        stop_once=bool(_field(searcher, "stop_once", False)),
        max_concurrent_trials=mct,
    )
    if name in ("single", "random", "grid"):
        return SearchPlan(
            unit=unit,
            length=length,
            time_driven=False,
            time_metric=None,
            divisor=4.0,
            brackets_rungs=[],
            brackets_trials=[],
            brackets_concurrency=[],
            **common,
        )

    divisor = float(_field(searcher, "divisor", 4))
    if not divisor > 1:
        raise ValueError(f"searcher.divisor: must be > 1 (got {searcher.get('divisor')!r})")
    max_trials = _positive_int(searcher, "max_trials", 16)
    time_metric, max_time = searcher.get("time_metric"), searcher.get("max_time")
    time_driven = time_metric is not None and max_time is not None
    if time_metric is not None and max_time is not None:
        unit, length = time_metric, int(max_time)
    elif searcher.get("max_length") is None:
        raise ValueError(
            f"searcher: {name!r} needs time_metric and max_time (e.g. time_metric: batches, "
            "max_time: 1000), or the older max_length"
        )
    if length < 1:
        raise ValueError(f"searcher: {name!r} needs a positive length (got {length})")
    if time_driven and not common["metric"]:
        raise ValueError(
            "searcher.metric: required to compare trials (the validation metric's name)"
        )

    if name == "async_halving":
        rungs = [_positive_int(searcher, "num_rungs", 4)]
        trials = [max_trials]
        concurrency = [mct]
    else:
        mode = _field(searcher, "mode", "standard")
        rungs = bracket_rungs(
            mode,
            int(_field(searcher, "max_rungs", 5)),
            length,
            max_trials,
            divisor,
            explicit=searcher.get("bracket_rungs") or (),
        )
        trials = bracket_trials(rungs, max_trials, divisor)
        concurrency = bracket_concurrency(trials, mct, divisor)
    return SearchPlan(
        unit=unit,
        length=length,
        time_driven=time_driven,
        time_metric=time_metric,
        divisor=divisor,
        brackets_rungs=rungs,
        brackets_trials=trials,
        brackets_concurrency=concurrency,
        **common,
    )


class _Searcher(SearchMethod):
    """Every searcher is a Tournament of engines (random/grid: one engine) plus the end-of-search
    bookkeeping: exactly one Shutdown, and nothing after it."""

    def __init__(self, plan: SearchPlan, factory: TrialFactory, tournament: Tournament) -> None:
        self.plan = plan
        self._factory = factory
        self._tournament = tournament
        self._started = False
        self._shutdown: Shutdown | None = None

    @property
    def engines(self) -> list[Any]:
        return self._tournament.engines

    def bracket_of(self, request_id: int) -> int:
        return self._tournament.bracket_of(request_id)

    @property
    def is_shut_down(self) -> bool:
        return self._shutdown is not None

    def _after(self, ops: list[Operation]) -> list[Operation]:
        out: list[Operation] = []
        for op in ops:
            if isinstance(op, Shutdown):
                self._shutdown = op
                return out + [op]
            out.append(op)
        if self._tournament.done():
            self._shutdown = Shutdown()
            out.append(self._shutdown)
        return out

    def _event(self, ops_from: Any, *args: Any) -> list[Operation]:
        if self._shutdown is not None or not self._started:
            return []
        return self._after(ops_from(*args))

    def initial_operations(self) -> list[Operation]:
        if self._started:
            return []
        self._started = True
        return self._after(self._tournament.initial())

    def on_trial_created(self, request_id: int) -> list[Operation]:
        return []  # every searcher counts a trial as created when it emits the Create

    def on_validation_completed(
        self, request_id: int, metric: float, length: int
    ) -> list[Operation]:
        return self._event(self._tournament.validation_completed, request_id, metric, int(length))

    def on_validation_reported(self, request_id: int, metrics: dict) -> list[Operation]:
        return self._event(self._tournament.validation_reported, request_id, metrics)

    def on_trial_exited_early(self, request_id: int, reason: ExitedReason) -> list[Operation]:
        return self._event(self._tournament.exited_early, request_id, ExitedReason(reason))

    def on_trial_closed(self, request_id: int) -> list[Operation]:
        return self._event(self._tournament.closed, request_id)

    def progress(self, trial_progress: dict[int, float]) -> float:
        """Fraction of the search done; ``trial_progress`` maps request id -> fraction (0..1) of
        that trial's length trained so far."""
        if self._shutdown is not None:
            return 1.0
        return self._tournament.progress(trial_progress)

    def snapshot(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "name": self.plan.name,
            "factory": self._factory.state(),
            "started": self._started,
            "shutdown": None if self._shutdown is None else dataclasses.asdict(self._shutdown),
            "tournament": self._tournament.state(),
        }

    def _load(self, snapshot: dict[str, Any]) -> None:
        if snapshot.get("version") != SNAPSHOT_VERSION or snapshot.get("name") != self.plan.name:
            raise ValueError(
                f"searcher snapshot is for {snapshot.get('name')!r} version {snapshot.get('version')!r}; "
                f"this config needs {self.plan.name!r} version {SNAPSHOT_VERSION}"
            )
        self._factory.load_state(snapshot["factory"])
        self._started = snapshot["started"]
        self._shutdown = None if snapshot["shutdown"] is None else Shutdown(**snapshot["shutdown"])
        self._tournament.load_state(snapshot["tournament"])


def _seed(config: dict[str, Any]) -> int:
    seed = (config.get("reproducibility") or {}).get("experiment_seed")
    if seed is None:
        return 0  # expanded configs always carry one; 0 keeps bare configs deterministic
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"reproducibility.experiment_seed: expected an int >= 0 (got {seed!r})")
    return seed


def make_searcher(config: dict[str, Any]) -> _Searcher:
    """A fresh searcher for an expanded experiment config (call ``initial_operations()`` first)."""
    plan = read_plan(config)
    searcher_config = config.get("searcher") or {}
    hparams = config.get("hyperparameters") or {}
    leaves(hparams)  # raises on a malformed hyperparameter before any trial is created
    factory = TrialFactory(
        hparams, _seed(config), checkpoint=searcher_config.get("source_checkpoint_uuid")
    )
    engines: list[Any]
    if plan.name in ("single", "random"):
        max_trials = (
            1 if plan.name == "single" else _positive_int(searcher_config, "max_trials", 16)
        )
        concurrency = 1 if plan.name == "single" else plan.max_concurrent_trials
        engines = [
            RandomEngine(
                factory,
                max_trials=max_trials,
                max_concurrent_trials=concurrency,
                length=plan.length,
            )
        ]
    elif plan.name == "grid":
        engines = [
            GridEngine(
                factory,
                points=grid_points(hparams),
                max_concurrent_trials=plan.max_concurrent_trials,
                length=plan.length,
            )
        ]
    else:
        engines = []
        for rungs, trials, concurrency in zip(
            plan.brackets_rungs, plan.brackets_trials, plan.brackets_concurrency, strict=False
        ):
            common: dict[str, Any] = dict(
                num_rungs=rungs,
                max_trials=trials,
                max_concurrent_trials=concurrency,
                divisor=plan.divisor,
                max_length=plan.length,
                smaller_is_better=plan.smaller_is_better,
            )
            if plan.time_driven:
                op_length = _op_length_for_time_driven(searcher_config, plan)
                engines.append(
                    StoppingAsha(
                        factory,
                        time_driven=True,
                        metric_name=plan.metric,
                        time_metric=plan.time_metric or "",
                        op_length=op_length,
                        **common,
                    )
                )
            elif plan.stop_once:
                engines.append(StoppingAsha(factory, **common))
            else:
                engines.append(PromotionAsha(factory, **common))
    return _Searcher(plan, factory, Tournament(engines))


def _op_length_for_time_driven(searcher_config: dict[str, Any], plan: SearchPlan) -> int:
    # In 0.38 only scripts with max_length ask for operations; the op is then the whole length.
    if searcher_config.get("max_length") is not None:
        return length_units(searcher_config["max_length"])[1]
    return plan.length


def restore_searcher(config: dict[str, Any], snapshot: dict[str, Any]) -> _Searcher:
    """Rebuild the searcher ``snapshot()`` captured; it continues exactly where that one was."""
    searcher = make_searcher(config)
    searcher._load(snapshot)
    return searcher
