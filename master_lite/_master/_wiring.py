"""Building the parts and wiring the calls that go both ways (see `Parts`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.checkpoints._checkpoints import Checkpoints
from master_lite.checkpoints._partials import PartialCheckpoints
from master_lite.experiments._editing import ExperimentEdits
from master_lite.experiments._experiments import Experiments
from master_lite.experiments._forks import Forks
from master_lite.experiments._recovery import Recovery
from master_lite.experiments._run_exits import RunExits
from master_lite.experiments._searchers import Searchers
from master_lite.models._models import Models
from master_lite.reports._logs import TrialLogs
from master_lite.reports._reporting import Reports
from master_lite.runs import TrialAccounts
from master_lite.runs._contexts import Contexts
from master_lite.runs._preemption import RunEnded, RunSettings
from master_lite.runs._runs import Runs
from master_lite.scheduler import GPU, Scheduler
from master_lite.tensorboards._tensorboards import TensorBoards
from master_lite.unmanaged._unmanaged import UnmanagedRuns


@dataclasses.dataclass(frozen=True)
class Parts:
    """Every part of one master, built and wired by `build_parts`."""

    shared: MasterState
    logs: TrialLogs
    views: Views
    contexts: Contexts
    searchers: Searchers
    runs: Runs
    experiments: Experiments
    edits: ExperimentEdits
    forks: Forks
    run_exits: RunExits
    reports: Reports
    checkpoints: Checkpoints
    models: Models
    recovery: Recovery
    tensorboards: TensorBoards
    unmanaged: UnmanagedRuns
    partials: PartialCheckpoints


def build_parts(
    shared: MasterState,
    *,
    scheduler: Scheduler,
    gpus: list[GPU],
    settings: RunSettings,
    context_size_limit: int,
    collect_garbage: Callable[[], None],
    delete_checkpoint_files: Callable[[str], None],
    tensorboard_refresh_seconds: float = 5.0,
    accounts: TrialAccounts | None = None,
) -> Parts:
    """Each part gets the parts it calls in its constructor; where two parts call each other,
    the one built first is wired to the other by its `connect`."""
    logs = TrialLogs(shared)
    views = Views(shared)
    contexts = Contexts(shared, size_limit=context_size_limit)
    searchers = Searchers(shared, views)
    runs = Runs(
        shared,
        views=views,
        contexts=contexts,
        logs=logs,
        scheduler=scheduler,
        gpus=gpus,
        settings=settings,
        accounts=accounts,
    )
    experiments = Experiments(
        shared,
        views=views,
        contexts=contexts,
        searchers=searchers,
        runs=runs,
        logs=logs,
        collect_garbage=collect_garbage,
    )
    checkpoints = Checkpoints(shared, views=views, runs=runs)
    edits = ExperimentEdits(
        shared,
        views=views,
        runs=runs,
        searchers=searchers,
        checkpoints=checkpoints,
        delete_checkpoint_files=delete_checkpoint_files,
    )
    run_exits = RunExits(shared, views=views, logs=logs, experiments=experiments, runs=runs)
    # The cycles: trial JSON shows the live allocation; a run's end goes back to the trial's and
    # the experiment's state machines.
    unmanaged = UnmanagedRuns(shared, views=views, logs=logs, experiments=experiments)
    views.connect(
        allocation_of=lambda trial_id: (
            runs.allocation_of_trial(trial_id) or unmanaged.kernel_allocation(trial_id)
        ),
        kernel_kept=runs.kernel_kept,
        wait_reason_of=lambda trial_id: scheduler.wait_reason(f"trial-{trial_id}"),
        experiment_wait_reason_of=scheduler.experiment_wait_reason,
    )
    partials = PartialCheckpoints(shared)

    def run_ended(ended: RunEnded) -> None:
        run_exits.run_ended(ended)
        # A run that died while saving left a partial directory in its experiment's storage.
        partials.request(shared.store.trials.experiment_of(ended.trial_id))

    runs.connect(on_run_ended=run_ended, on_launch_failed=run_exits.trial_failed_to_start)
    return Parts(
        shared=shared,
        logs=logs,
        views=views,
        contexts=contexts,
        searchers=searchers,
        runs=runs,
        experiments=experiments,
        edits=edits,
        forks=Forks(shared, views=views, experiments=experiments),
        run_exits=run_exits,
        reports=Reports(shared, views=views, searchers=experiments),
        checkpoints=checkpoints,
        models=Models(shared, checkpoints=checkpoints),
        recovery=Recovery(
            shared, logs=logs, searchers=searchers, experiments=experiments, runs=runs
        ),
        tensorboards=TensorBoards(shared, views, refresh_seconds=tensorboard_refresh_seconds),
        unmanaged=unmanaged,
        partials=partials,
    )


__all__ = ["Parts", "build_parts"]
