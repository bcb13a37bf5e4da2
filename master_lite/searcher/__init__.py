"""Hyperparameter searchers: pure, deterministic, event-driven state machines.

Events in (trial created, validation completed/reported, trial exited early, trial closed),
operations out (Create, ValidateAfter, Close, Stop, Shutdown). No I/O, no clock, no threads:
the master persists ``snapshot()`` after every event and ``restore_searcher`` resumes exactly.
"""

from master_lite.searcher._adaptive import (
    bracket_concurrency,
    bracket_rungs,
    bracket_trials,
    max_rungs_for,
)
from master_lite.searcher._asha import WORST_METRIC, rung_lengths
from master_lite.searcher._factory import (
    SearchPlan,
    length_units,
    make_searcher,
    read_plan,
    restore_searcher,
)
from master_lite.searcher._hparams import grid_points, sample_hparams
from master_lite.searcher._ops import (
    Close,
    Create,
    ExitedReason,
    Operation,
    SearchMethod,
    Shutdown,
    Stop,
    ValidateAfter,
    operation_from_json,
    operation_to_json,
)
from master_lite.searcher._preview import format_preview
from master_lite.searcher._simulate import (
    BracketSummary,
    RungSummary,
    SimulatedTrial,
    Simulation,
    simulate,
)

__all__ = [
    "BracketSummary",
    "Close",
    "Create",
    "ExitedReason",
    "Operation",
    "RungSummary",
    "SearchMethod",
    "SearchPlan",
    "Shutdown",
    "SimulatedTrial",
    "Simulation",
    "Stop",
    "ValidateAfter",
    "WORST_METRIC",
    "bracket_concurrency",
    "bracket_rungs",
    "bracket_trials",
    "format_preview",
    "grid_points",
    "length_units",
    "make_searcher",
    "max_rungs_for",
    "operation_from_json",
    "operation_to_json",
    "read_plan",
    "restore_searcher",
    "rung_lengths",
    "sample_hparams",
    "simulate",
]
