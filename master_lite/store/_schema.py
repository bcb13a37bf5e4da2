"""The database schema as an ordered list of migrations.

Migration N is applied once, in order, and recorded in `schema_version`; never edit a released
migration — append a new one.
"""

from __future__ import annotations

MIGRATION_1_INITIAL = """
CREATE TABLE contexts (
    hash TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE experiments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    description TEXT,
    labels TEXT NOT NULL DEFAULT '[]',
    state TEXT NOT NULL,
    archived INTEGER NOT NULL DEFAULT 0,
    config TEXT NOT NULL,
    original_config TEXT,
    context_hash TEXT REFERENCES contexts(hash),
    notebook TEXT,
    parent_id INTEGER,
    progress REAL NOT NULL DEFAULT 0,
    start_time REAL NOT NULL,
    end_time REAL,
    searcher_snapshot TEXT,
    searcher_shutdown INTEGER NOT NULL DEFAULT 0,
    searcher_failure INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    request_id INTEGER NOT NULL,
    state TEXT NOT NULL,
    hparams TEXT NOT NULL,
    seed INTEGER NOT NULL,
    restarts INTEGER NOT NULL DEFAULT 0,
    run_id INTEGER NOT NULL DEFAULT 0,
    steps_completed INTEGER NOT NULL DEFAULT 0,
    progress REAL NOT NULL DEFAULT 0,
    runner_state TEXT NOT NULL DEFAULT '',
    start_time REAL NOT NULL,
    end_time REAL,
    exit_code INTEGER,
    latest_checkpoint TEXT,
    early_exit TEXT,
    op_queue TEXT NOT NULL DEFAULT '[]',
    closed INTEGER NOT NULL DEFAULT 0,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    latest_training_id INTEGER,
    latest_validation_id INTEGER,
    best_validation_id INTEGER,
    UNIQUE (experiment_id, request_id)
);
CREATE INDEX trials_by_experiment ON trials (experiment_id, id);
CREATE TABLE metrics (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trial_id INTEGER NOT NULL REFERENCES trials(id),
    trial_run_id INTEGER NOT NULL,
    group_name TEXT NOT NULL,
    steps_completed INTEGER NOT NULL,
    metrics TEXT NOT NULL,
    batch_metrics TEXT,
    report_time REAL NOT NULL
);
CREATE INDEX metrics_by_trial_group ON metrics (trial_id, group_name, id);
CREATE TABLE checkpoints (
    uuid TEXT PRIMARY KEY,
    trial_id INTEGER NOT NULL REFERENCES trials(id),
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    allocation_id TEXT,
    steps_completed INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    resources TEXT NOT NULL,
    state TEXT NOT NULL,
    report_time REAL NOT NULL,
    path TEXT NOT NULL
);
CREATE INDEX checkpoints_by_trial ON checkpoints (trial_id, report_time);
CREATE TABLE logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trial_id INTEGER NOT NULL,
    rank INTEGER,
    stream TEXT NOT NULL,
    time REAL NOT NULL,
    line TEXT NOT NULL
);
CREATE INDEX logs_by_trial ON logs (trial_id, id);
CREATE TABLE allocations (
    id TEXT PRIMARY KEY,
    trial_id INTEGER NOT NULL REFERENCES trials(id),
    run_id INTEGER NOT NULL,
    state TEXT NOT NULL,
    slot_ids TEXT NOT NULL DEFAULT '[]',
    pid INTEGER,
    pgid INTEGER,
    start_time REAL NOT NULL,
    end_time REAL,
    exit_code INTEGER,
    preempt_requested INTEGER NOT NULL DEFAULT 0,
    preempt_acked INTEGER NOT NULL DEFAULT 0,
    end_intent TEXT
);
CREATE INDEX allocations_by_trial ON allocations (trial_id);
CREATE TABLE trial_tokens (
    token_hash TEXT PRIMARY KEY,
    trial_id INTEGER NOT NULL,
    allocation_id TEXT NOT NULL
);
"""

# Fault tolerance and checkpoint GC (docs/fault-tolerance.md):
# * metrics.superseded_by_run: a resumed run redoes the steps after its checkpoint and reports
#   them again; the later report of a (trial, group, steps_completed) supersedes the earlier one
#   (kept, but no longer part of the trial's series). NULL = current.
# * experiments.warm_start_checkpoint: the checkpoint `searcher.source_trial_id` resolved to at
#   creation (or `source_checkpoint_uuid`), protected from GC while the experiment lives.
# * experiments.checkpoint_gc_done: GC after the end ran to completion (nothing left protected).
MIGRATION_2_FAULT_TOLERANCE = """
ALTER TABLE metrics ADD COLUMN superseded_by_run INTEGER;
ALTER TABLE experiments ADD COLUMN warm_start_checkpoint TEXT;
ALTER TABLE experiments ADD COLUMN checkpoint_gc_done INTEGER NOT NULL DEFAULT 0;
CREATE INDEX metrics_by_trial_group_steps ON metrics (trial_id, group_name, steps_completed)
"""

# Reads of current series (docs/rest-api.md, "Paging and downsampling"): every metric read asks
# for `trial_id = ? [AND group_name = ?] AND superseded_by_run IS NULL`, in id order. With
# superseded_by_run inside the index those reads never touch the table rows until the reports
# they return (a downsampled read of 1,000 trials x 100 validations scans the index only). It
# replaces metrics_by_trial_group (same leading columns), so writes maintain no extra index.
MIGRATION_3_CURRENT_SERIES_INDEX = """
DROP INDEX IF EXISTS metrics_by_trial_group;
CREATE INDEX metrics_current_by_trial_group ON metrics (trial_id, group_name, superseded_by_run, id)
"""

# What a person needs to see why a trial stopped (docs/rest-api.md, "Trial"):
# * trials.exit_summary: its last run's exit in words ("killed by signal SIGKILL (9): possibly
#   out of memory ..."), NULL after a clean exit;
# * trials.notebook_error: the notebook cell and line where an exported notebook's code failed,
#   from the run's DET_NOTEBOOK_ERROR log line (determined.common.notebook_errors), JSON.
MIGRATION_4_TRIAL_EXIT_DETAILS = """
ALTER TABLE trials ADD COLUMN exit_summary TEXT;
ALTER TABLE trials ADD COLUMN notebook_error TEXT
"""

# The model registry (docs/sdk.md, "Model registry"; docs/rest-api.md, "Models"): named models,
# and their numbered versions, each one checkpoint. Names are stored as written (the Models part
# refuses one equal to another's in any case, as Determined does). A version's checkpoint_uuid
# has no foreign key: a re-report of a checkpoint replaces its row (INSERT OR REPLACE), which a
# reference would refuse; the registry checks the checkpoint exists when a version is
# registered, and checkpoint GC and deletion keep it while a version names it
# (model_versions_by_checkpoint serves that check).
MIGRATION_5_MODEL_REGISTRY = """
CREATE TABLE models (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    notes TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    labels TEXT NOT NULL DEFAULT '[]',
    archived INTEGER NOT NULL DEFAULT 0,
    creation_time REAL NOT NULL,
    last_updated_time REAL NOT NULL
);
CREATE TABLE model_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    checkpoint_uuid TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    comment TEXT NOT NULL DEFAULT '',
    notes TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    labels TEXT NOT NULL DEFAULT '[]',
    creation_time REAL NOT NULL,
    last_updated_time REAL NOT NULL,
    UNIQUE (model_id, version)
);
CREATE INDEX model_versions_by_checkpoint ON model_versions (checkpoint_uuid)
"""

# Runs that train in a Jupyter kernel (or any process the master does not start), tracked like
# Determined's unmanaged trials (docs/results.md, "Tracking a run that trains in the kernel"):
# one row per unmanaged trial, found again by the external ids a resumed run gives. The kernel
# holds a lease it renews by heartbeat; `lease_expires` (wall clock, so it survives a master
# restart) past due ends the trial as ERROR, NULL once it ended. The token is the kernel's, stored
# hashed; it authorizes only this trial's reports while the trial is live.
MIGRATION_6_UNMANAGED = """
CREATE TABLE unmanaged_trials (
    trial_id INTEGER PRIMARY KEY REFERENCES trials(id),
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    external_experiment_id TEXT NOT NULL,
    external_trial_id TEXT NOT NULL,
    token_hash TEXT,
    lease_seconds REAL NOT NULL,
    lease_expires REAL,
    host TEXT NOT NULL DEFAULT '',
    UNIQUE (external_experiment_id, external_trial_id)
);
CREATE INDEX unmanaged_trials_by_token ON unmanaged_trials (token_hash)
"""

# A user's notes on an experiment (`det`/SDK `Experiment.set_notes`, PATCH /experiments/{id}),
# as Determined keeps them: free text, empty until set.
MIGRATION_7_EXPERIMENT_NOTES = """
ALTER TABLE experiments ADD COLUMN notes TEXT NOT NULL DEFAULT ''
"""

# Users of a shared master (docs/team.md), as Determined keeps them: a name, a password hash
# (argon2, master_lite/users/_passwords.py; NULL: no password, no password login), the admin and
# active flags. User 1 is the master's owner account, the holder of the master token (its name
# is set at every start to the Unix login that runs the master). Sign-ins are `user_sessions`:
# only the sha256 of a session token is stored, as for trial tokens. Every experiment and model
# records its owner (trials, checkpoints and TensorBoards are their experiment's); rows made
# before this migration belong to the owner account (DEFAULT 1; no REFERENCES, which SQLite
# refuses on an added column with a default).
MIGRATION_8_USERS = """
CREATE TABLE users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    username TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL DEFAULT '',
    password_hash TEXT,
    admin INTEGER NOT NULL DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1,
    created REAL NOT NULL,
    modified REAL NOT NULL
);
INSERT INTO users (id, username, admin, active, created, modified)
    VALUES (1, 'determined', 1, 1, 0, 0);
CREATE TABLE user_sessions (
    token_hash TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    created REAL NOT NULL
);
ALTER TABLE experiments ADD COLUMN owner_id INTEGER NOT NULL DEFAULT 1;
ALTER TABLE models ADD COLUMN owner_id INTEGER NOT NULL DEFAULT 1
"""

# Workspaces and projects (docs/team.md, "Workspaces and projects"), as Determined groups
# experiments: a workspace holds projects, a project holds experiments. Workspace 1 and its
# project 1, both "Uncategorized", are Determined's defaults: they cannot be renamed, archived
# or deleted, and every experiment made before this migration is in project 1 (DEFAULT 1; no
# REFERENCES on the added column, which SQLite refuses with a default). A project's name is
# unique within its workspace; its `key` (Determined 0.26+) across the master.
MIGRATION_9_WORKSPACES = """
CREATE TABLE workspaces (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    owner_id INTEGER NOT NULL DEFAULT 1,
    archived INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
INSERT INTO workspaces (id, name, owner_id, archived, created) VALUES (1, 'Uncategorized', 1, 0, 0);
CREATE TABLE projects (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id),
    owner_id INTEGER NOT NULL DEFAULT 1,
    archived INTEGER NOT NULL DEFAULT 0,
    description TEXT NOT NULL DEFAULT '',
    key TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    UNIQUE (workspace_id, name)
);
INSERT INTO projects (id, name, workspace_id, owner_id, archived, description, key, created)
    VALUES (1, 'Uncategorized', 1, 1, 0, '', 'UNCAT', 0);
ALTER TABLE experiments ADD COLUMN project_id INTEGER NOT NULL DEFAULT 1;
CREATE INDEX experiments_by_project ON experiments (project_id)
"""

# The job queue (docs/scheduling.md, "Job queue"): an experiment's place among the jobs of its
# priority, set by `det job update --ahead-of/--behind-of` (NULL: never moved; its id is its
# place), so that a master restart keeps the order users chose.
MIGRATION_10_QUEUE_POSITION = """
ALTER TABLE experiments ADD COLUMN queue_position REAL
"""

# A workspace's scheduling settings (docs/scheduling.md, "Workspace quotas and default pools"):
# Determined's `default_compute_pool` (the resource pool of its experiments that name none; ''
# for the master's default) and a slot quota, `resource_quota` (the most slots its experiments
# may hold at once; NULL: no limit), as Determined's workspace resource quota.
MIGRATION_11_WORKSPACE_SCHEDULING = """
ALTER TABLE workspaces ADD COLUMN default_compute_pool TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN resource_quota INTEGER
"""

MIGRATIONS: list[str] = [
    MIGRATION_1_INITIAL,
    MIGRATION_2_FAULT_TOLERANCE,
    MIGRATION_3_CURRENT_SERIES_INDEX,
    MIGRATION_4_TRIAL_EXIT_DETAILS,
    MIGRATION_5_MODEL_REGISTRY,
    MIGRATION_6_UNMANAGED,
    MIGRATION_7_EXPERIMENT_NOTES,
    MIGRATION_8_USERS,
    MIGRATION_9_WORKSPACES,
    MIGRATION_10_QUEUE_POSITION,
    MIGRATION_11_WORKSPACE_SCHEDULING,
]

# Columns holding JSON, decoded on read and encoded on write by the store.
JSON_COLUMNS: dict[str, frozenset[str]] = {
    "experiments": frozenset({"labels", "config", "notebook", "searcher_snapshot"}),
    "trials": frozenset({"hparams", "op_queue", "notebook_error"}),
    "metrics": frozenset({"metrics", "batch_metrics"}),
    "checkpoints": frozenset({"metadata", "resources"}),
    "allocations": frozenset({"slot_ids"}),
    "contexts": frozenset(),
    "logs": frozenset(),
    "trial_tokens": frozenset(),
    "models": frozenset({"metadata", "labels"}),
    "model_versions": frozenset({"metadata", "labels"}),
    "unmanaged_trials": frozenset(),
    "users": frozenset(),
    "user_sessions": frozenset(),
    "workspaces": frozenset(),
    "projects": frozenset(),
}
