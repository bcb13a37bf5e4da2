"""Typed rows: what the repositories hand out, one frozen dataclass per table of an aggregate.

A row's fields are its table's columns, in the table's order after every migration
(`_schema.MIGRATIONS`), with JSON columns decoded and the 0/1 flag columns as `bool`. A row is a
snapshot of the database when it was read: frozen, so that nobody mistakes assigning a field for
writing the database (writes are the repositories' named methods). Frozen is shallow: a decoded
JSON value (a config dict, a list of slot ids) is still a plain dict or list; treat it as
read-only.

Metric reports and log lines are not typed: they are bulk payloads (thousands of rows a read)
that the API turns straight into JSON, so the repositories of `_series.py` hand them out as the
store's dicts (metrics mostly as JSON text built in SQLite, see `_queries.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Row")


@dataclasses.dataclass(frozen=True)
class Row:
    """Base of the typed rows: the table's name, its key column and its flag columns."""

    TABLE: ClassVar[str]
    KEY: ClassVar[str] = "id"
    # Columns only `set_state` writes (with its companions), never the generic `update`: the
    # state of an entity has one owner (master_lite/_core/_states.py).
    STATE_COLUMNS: ClassVar[frozenset[str]] = frozenset()
    # INTEGER 0/1 columns read as bool (written as bool too: sqlite3 stores True as 1).
    FLAGS: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The table's columns (= the fields), in order."""
        # Kept per class: every row read asks (2,000 rows of a list spent 16 ms in fields()).
        cached = cls.__dict__.get("_columns")
        if cached is None:
            cached = tuple(field.name for field in dataclasses.fields(cls))
            cls._columns = cached  # type: ignore[attr-defined]  # a class attribute
        return cached

    @classmethod
    def from_stored(cls: type[R], stored: Mapping[str, Any]) -> R:
        """The row from the store's dict of it (JSON columns already decoded)."""
        values = {name: stored[name] for name in cls.columns()}
        for name in cls.FLAGS:
            values[name] = bool(values[name])
        return cls(**values)

    @classmethod
    def check_columns(cls, names: Any, *, writing_key: bool = False) -> None:
        """Refuse names that are not columns of the table (a typo must not reach SQL, where
        a column name is spliced into the statement). The key is not written unless asked."""
        allowed = set(cls.columns())
        if not writing_key:
            allowed.discard(cls.KEY)
        unknown = sorted(set(names) - allowed)
        if unknown:
            raise ValueError(
                f"{cls.TABLE}: no writable column {', '.join(map(repr, unknown))} "
                f"(columns: {', '.join(sorted(allowed))})"
            )


@dataclasses.dataclass(frozen=True)
class ExperimentRow(Row):
    """A row of `experiments`."""

    STATE_COLUMNS: ClassVar[frozenset[str]] = frozenset({"state", "end_time"})

    TABLE: ClassVar[str] = "experiments"
    FLAGS: ClassVar[frozenset[str]] = frozenset(
        {"archived", "searcher_shutdown", "searcher_failure", "checkpoint_gc_done"}
    )

    id: int
    name: str
    description: str | None
    labels: list[str]  # JSON
    state: str  # an ExperimentState value
    archived: bool
    config: dict[str, Any]  # JSON: the expanded config
    original_config: str | None  # the text as submitted
    context_hash: str | None
    notebook: dict[str, Any] | None  # JSON
    parent_id: int | None
    progress: float
    start_time: float
    end_time: float | None
    searcher_snapshot: Any  # JSON: the searcher's state, None before the first save
    searcher_shutdown: bool
    searcher_failure: bool
    warm_start_checkpoint: str | None  # migration 2
    checkpoint_gc_done: bool  # migration 2
    notes: str  # migration 7
    owner_id: int  # migration 8: the user who created it (1: the owner account)
    project_id: int  # migration 9: its project (1: "Uncategorized")
    queue_position: float | None  # migration 10: its job queue place if moved (None: its id)


@dataclasses.dataclass(frozen=True)
class TrialRow(Row):
    """A row of `trials`."""

    STATE_COLUMNS: ClassVar[frozenset[str]] = frozenset({"state", "end_time"})

    TABLE: ClassVar[str] = "trials"
    FLAGS: ClassVar[frozenset[str]] = frozenset({"closed", "stop_requested"})

    id: int
    experiment_id: int
    request_id: int
    state: str  # a TrialState value
    hparams: dict[str, Any]  # JSON
    seed: int
    restarts: int
    run_id: int
    steps_completed: int
    progress: float
    runner_state: str
    start_time: float
    end_time: float | None
    exit_code: int | None
    latest_checkpoint: str | None
    early_exit: str | None
    op_queue: list[int]  # JSON: lengths of the searcher's pending validate-after operations
    closed: bool
    stop_requested: bool
    latest_training_id: int | None
    latest_validation_id: int | None
    best_validation_id: int | None
    exit_summary: str | None  # migration 4
    notebook_error: dict[str, Any] | None  # JSON, migration 4


@dataclasses.dataclass(frozen=True)
class AllocationRow(Row):
    """A row of `allocations`: one run of a trial."""

    TABLE: ClassVar[str] = "allocations"
    FLAGS: ClassVar[frozenset[str]] = frozenset({"preempt_requested", "preempt_acked"})

    id: str
    trial_id: int
    run_id: int
    state: str  # RUNNING or ENDED
    slot_ids: list[int]  # JSON
    pid: int | None
    pgid: int | None
    start_time: float
    end_time: float | None
    exit_code: int | None
    preempt_requested: bool
    preempt_acked: bool
    end_intent: str | None


@dataclasses.dataclass(frozen=True)
class TokenRow(Row):
    """A row of `trial_tokens`: a run's token, stored hashed."""

    TABLE: ClassVar[str] = "trial_tokens"
    KEY: ClassVar[str] = "token_hash"

    token_hash: str
    trial_id: int
    allocation_id: str


@dataclasses.dataclass(frozen=True)
class UnmanagedTrialRow(Row):
    """A row of `unmanaged_trials` (migration 6): a trial that trains where the master does not
    run it (a Jupyter kernel), with the lease that keeps it live."""

    TABLE: ClassVar[str] = "unmanaged_trials"
    KEY: ClassVar[str] = "trial_id"

    trial_id: int
    experiment_id: int
    external_experiment_id: str
    external_trial_id: str
    token_hash: str | None  # sha256 of the kernel's token; None once the trial ended
    lease_seconds: float
    lease_expires: float | None  # wall-clock deadline of the lease; None once the trial ended
    host: str  # where it runs, for people ("kernel on HOST pid N")


@dataclasses.dataclass(frozen=True)
class CheckpointRow(Row):
    """A row of `checkpoints`."""

    TABLE: ClassVar[str] = "checkpoints"
    KEY: ClassVar[str] = "uuid"

    uuid: str
    trial_id: int
    experiment_id: int
    allocation_id: str | None
    steps_completed: int
    metadata: dict[str, Any]  # JSON
    resources: dict[str, Any]  # JSON: file -> size
    state: str  # a CheckpointState value
    report_time: float
    path: str


@dataclasses.dataclass(frozen=True)
class ContextRow(Row):
    """A row of `contexts`: an uploaded context tarball."""

    TABLE: ClassVar[str] = "contexts"
    KEY: ClassVar[str] = "hash"

    hash: str
    path: str
    size: int
    created: float


@dataclasses.dataclass(frozen=True)
class ModelRow(Row):
    """A row of `models` (migration 5): a model of the registry."""

    TABLE: ClassVar[str] = "models"
    FLAGS: ClassVar[frozenset[str]] = frozenset({"archived"})

    id: int
    name: str
    description: str
    notes: str
    metadata: dict[str, Any]  # JSON
    labels: list[str]  # JSON
    archived: bool
    creation_time: float
    last_updated_time: float
    owner_id: int  # migration 8: the user who created it (1: the owner account)


@dataclasses.dataclass(frozen=True)
class ModelVersionRow(Row):
    """A row of `model_versions` (migration 5): one checkpoint registered as a model's
    version."""

    TABLE: ClassVar[str] = "model_versions"

    id: int
    model_id: int
    version: int  # 1, 2, ... within the model
    checkpoint_uuid: str
    name: str
    comment: str
    notes: str
    metadata: dict[str, Any]  # JSON
    labels: list[str]  # JSON
    creation_time: float
    last_updated_time: float


__all__ = [
    "AllocationRow",
    "ModelRow",
    "ModelVersionRow",
    "CheckpointRow",
    "ContextRow",
    "ExperimentRow",
    "Row",
    "TokenRow",
    "TrialRow",
    "UnmanagedTrialRow",
]
