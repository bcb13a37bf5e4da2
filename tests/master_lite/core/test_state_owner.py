"""One owner of trial and experiment state (master_lite/_core/_states.py).

Two halves: every source file of master_lite is parsed, and a write of a trial's or an
experiment's state anywhere but the owner fails the test (a `set_state` call, a `create` that
sets the initial state, an `update` naming a state column, SQL that updates those tables outside
the store); and the owner itself refuses what its state machine does not allow. A third scan
keeps the store's generic update private: outside `store/`, rows change only through the
repositories' named writes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from determined.common.states import ExperimentState, TrialState
from master_lite._core._states import ExperimentStates, IllegalTransition, TrialStates
from master_lite.store import Store

REPO = Path(__file__).resolve().parents[3]
OWNER = "master_lite/_core/_states.py"
STORE = "master_lite/store/"  # the repositories the owner calls, and the SQL behind them
ENTITY_TABLES = {"trials", "experiments"}
STATE_COLUMNS = {"state", "end_time"}
STATE_SQL = re.compile(r"\bUPDATE\s+(trials|experiments)\b", re.IGNORECASE)


def _names(node: ast.expr) -> list[str]:
    """`a.b.c` -> ["a", "b", "c"] (what an attribute chain names; other nodes give [])."""
    if isinstance(node, ast.Attribute):
        return [*_names(node.value), node.attr]
    if isinstance(node, ast.Name):
        return [node.id]
    return []


def state_writes(source: str) -> list[tuple[int, str]]:
    """(line, what) for each write of a trial's or an experiment's state in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if STATE_SQL.search(node.value):
                found.append((node.lineno, "SQL that updates trials or experiments"))
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        chain = _names(node.func)
        method, owner = chain[-1], (chain[-2] if len(chain) > 1 else "")
        keywords = {k.arg for k in node.keywords if k.arg}
        if method == "set_state":
            found.append((node.lineno, f"{'.'.join(chain)}(): only the state owner sets states"))
        elif method == "create" and owner in ENTITY_TABLES:
            found.append((node.lineno, f"{'.'.join(chain)}(): a new row's state is the owner's"))
        elif method == "update" and owner in ENTITY_TABLES and keywords & STATE_COLUMNS:
            found.append(
                (node.lineno, f"{'.'.join(chain)}() writes {sorted(keywords & STATE_COLUMNS)}")
            )
        elif method in ("update", "insert") and node.args:
            table = node.args[0]
            if isinstance(table, ast.Constant) and table.value in ENTITY_TABLES:
                found.append((node.lineno, f"{'.'.join(chain)}({table.value!r}, ...)"))
    return found


# The store's repositories (`Store.<name>`): outside `store/` they are written only through
# their named methods (`trials.set_progress`, `allocations.mark_preempt_requested`, ...).
REPOSITORIES = {
    "experiments",
    "trials",
    "allocations",
    "metrics",
    "logs",
    "checkpoints",
    "contexts",
    "models",
    "model_versions",
    "unmanaged",
    "workspaces",
    "projects",
}


def generic_writes(source: str) -> list[tuple[int, str]]:
    """(line, what) for each generic update in `source`: `<repository>.update(...)` or
    `._update(...)` of a repository, and the database's `update("<table>", ...)`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        chain = _names(node.func)
        method, owner = chain[-1], (chain[-2] if len(chain) > 1 else "")
        if method not in ("update", "_update"):
            continue
        first = node.args[0] if node.args else None
        table_first = isinstance(first, ast.Constant) and isinstance(first.value, str)
        if owner in REPOSITORIES or table_first:
            found.append((node.lineno, f"{'.'.join(chain)}(): write through a named store method"))
    return found


def test_no_part_calls_the_stores_generic_update() -> None:
    problems = []
    for path in sorted((REPO / "master_lite").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(STORE):
            continue
        for line, what in generic_writes(path.read_text(encoding="utf-8")):
            problems.append(f"{relative}:{line}: {what}")
    assert not problems, "generic update outside master_lite/store/:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        "self._shared.store.trials.update(1, progress=0.5)\n",
        "store.allocations.update('a', preempt_acked=True)\n",
        "store.unmanaged._update(1, lease_expires=None)\n",
        "self.store.checkpoints.update(uuid, state='DELETED')\n",
        "store.update('allocations', 'a', pid=3)\n",
    ],
)
def test_the_scan_finds_every_generic_update(source: str) -> None:
    assert len(generic_writes(source)) == 1


def test_the_scan_lets_named_writes_and_dict_updates_through() -> None:
    source = (
        "store.trials.set_progress(1, 0.5)\n"
        "store.allocations.mark_preempt_requested('a')\n"
        "env.update(own)\n"
        "config.setdefault('resources', {}).update(edit)\n"
        "keep.update(c.uuid for c in ranked)\n"
    )
    assert generic_writes(source) == []


def test_only_the_state_owner_writes_a_trials_or_an_experiments_state() -> None:
    problems = []
    for path in sorted((REPO / "master_lite").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative == OWNER or relative.startswith(STORE):
            continue
        for line, what in state_writes(path.read_text(encoding="utf-8")):
            problems.append(f"{relative}:{line}: {what}")
    assert not problems, "state written outside master_lite/_core/_states.py:\n" + "\n".join(
        problems
    )


@pytest.mark.parametrize(
    "source",
    [
        "store.trials.set_state(1, 'PAUSED')\n",
        "self._shared.store.experiments.set_state(1, 'ACTIVE', end_time=None)\n",
        "store.trials.create(experiment_id=1, state='ACTIVE')\n",
        "self._shared.store.experiments.create(name='e')\n",
        "store.trials.update(1, state='ACTIVE', end_time=None)\n",
        "store.experiments.update(1, end_time=2.0)\n",
        "store.update('trials', 1, progress=1.0)\n",
        "store.execute('UPDATE trials SET state = ? WHERE id = ?', ('ERROR', 1))\n",
    ],
)
def test_the_scan_finds_every_form_of_state_write(source: str) -> None:
    assert len(state_writes(source)) == 1


def test_the_scan_lets_other_columns_through() -> None:
    source = (
        "store.trials.update(1, progress=0.5)\n"
        "store.experiments.update(1, progress=0.2)\n"
        "store.allocations.update('a', state='TERMINATED')\n"
        "shared.trial_states.end(1, final, end_time=2.0)\n"
    )
    assert state_writes(source) == []


# --- the owner's state machine ---------------------------------------------------------------


@pytest.fixture
def owner(tmp_path):
    store = Store(tmp_path / "master.db")
    trials, experiments = TrialStates(lambda: store), ExperimentStates(lambda: store)
    yield store, trials, experiments
    store.close()


def _trial(store: Store, trials: TrialStates, experiments: ExperimentStates) -> tuple[int, int]:
    exp_id = experiments.create(paused=False, name="e", config={}, start_time=1.0)
    trial_id = trials.create(
        paused=False, experiment_id=exp_id, request_id=1, hparams={}, seed=1, start_time=1.0
    )
    return exp_id, trial_id


def test_a_trial_goes_through_its_named_transitions(owner) -> None:
    store, trials, experiments = owner
    _, trial_id = _trial(store, trials, experiments)
    assert store.trials.get(trial_id).state == TrialState.ACTIVE
    assert trials.pause(trial_id) == TrialState.ACTIVE
    assert trials.start_run(trial_id, run_id=2) == TrialState.PAUSED
    assert trials.stop(trial_id, TrialState.STOPPING_COMPLETED) == TrialState.ACTIVE
    trials.end(trial_id, TrialState.COMPLETED, end_time=5.0, exit_code=0)
    row = store.trials.get(trial_id)
    assert (row.state, row.end_time, row.exit_code, row.progress, row.run_id) == (
        "COMPLETED",
        5.0,
        0,
        1.0,
        2,
    )
    # A searcher's promotion reopens a completed trial: live again, no end time.
    trials.reopen(trial_id, allowed=frozenset({TrialState.COMPLETED}), op_queue=[10])
    row = store.trials.get(trial_id)
    assert (row.state, row.end_time, row.op_queue) == ("ACTIVE", None, [10])


@pytest.mark.parametrize(
    "transition",
    [
        lambda t, i: t.end(i, TrialState.CANCELED, end_time=6.0),
        lambda t, i: t.pause(i),
        lambda t, i: t.activate(i),
        lambda t, i: t.start_run(i, run_id=3),
        lambda t, i: t.stop(i, TrialState.STOPPING_KILLED),
        lambda t, i: t.reopen(i, allowed=frozenset({TrialState.COMPLETED})),
    ],
)
def test_an_ended_trial_refuses_every_transition_but_an_allowed_reopen(owner, transition) -> None:
    store, trials, experiments = owner
    _, trial_id = _trial(store, trials, experiments)
    trials.end(trial_id, TrialState.ERROR, end_time=5.0)
    with pytest.raises(IllegalTransition):
        transition(trials, trial_id)
    row = store.trials.get(trial_id)
    assert (row.state, row.end_time) == ("ERROR", 5.0)  # nothing was written


def test_a_transition_takes_only_the_states_it_names(owner) -> None:
    store, trials, experiments = owner
    exp_id, trial_id = _trial(store, trials, experiments)
    with pytest.raises(ValueError):
        trials.stop(trial_id, TrialState.PAUSED)
    with pytest.raises(ValueError):
        trials.end(trial_id, TrialState.STOPPING_ERROR, end_time=1.0)
    with pytest.raises(ValueError):
        experiments.end(exp_id, ExperimentState.PAUSED, end_time=1.0)
    assert store.trials.get(trial_id).state == "ACTIVE"


def test_an_experiment_goes_through_its_named_transitions(owner) -> None:
    store, _, experiments = owner
    exp_id = experiments.create(paused=True, name="e", config={}, start_time=1.0)
    assert store.experiments.get(exp_id).state == ExperimentState.PAUSED
    experiments.activate(exp_id)
    experiments.pause(exp_id)
    experiments.activate(exp_id)
    experiments.stop(exp_id, ExperimentState.STOPPING_CANCELED)
    with pytest.raises(IllegalTransition):
        experiments.pause(exp_id)  # a stopping experiment does not pause
    experiments.end(exp_id, ExperimentState.CANCELED, end_time=9.0)
    for refused in (
        experiments.activate,
        experiments.pause,
        lambda e: experiments.stop(e, ExperimentState.STOPPING_ERROR),
        lambda e: experiments.end(e, ExperimentState.COMPLETED, end_time=10.0),
    ):
        with pytest.raises(IllegalTransition):
            refused(exp_id)
    row = store.experiments.get(exp_id)
    assert (row.state, row.end_time) == ("CANCELED", 9.0)
    with pytest.raises(IllegalTransition):
        experiments.reopen(exp_id)  # a managed experiment never comes back
    # A kernel run resuming by its external ids brings its (unmanaged) experiment back.
    kernel_runs = experiments.create(
        paused=False, name="k", config={"unmanaged": True}, start_time=1.0
    )
    experiments.end(kernel_runs, ExperimentState.COMPLETED, end_time=9.0)
    experiments.reopen(kernel_runs, archived=False)
    row = store.experiments.get(kernel_runs)
    assert (row.state, row.end_time) == ("ACTIVE", None)


def test_the_stores_generic_update_refuses_the_state_columns(owner) -> None:
    store, trials, experiments = owner
    exp_id, trial_id = _trial(store, trials, experiments)
    with pytest.raises(ValueError, match="named state transition"):
        store.trials._update(trial_id, state="COMPLETED")
    with pytest.raises(ValueError, match="named state transition"):
        store.experiments._update(exp_id, end_time=3.0)
    store.trials.set_progress(trial_id, 0.5)  # other columns are the parts' own, by name
    assert store.trials.get(trial_id).state == "ACTIVE"
