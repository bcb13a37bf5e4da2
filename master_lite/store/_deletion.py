"""Removing an experiment's rows: the one multi-table delete of the store.

Children go before their parents (the schema's foreign keys are enforced), all in one
transaction, so a failure leaves the experiment whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._database import Database

# (table, the condition naming the experiment's rows); children first. Logs and trial tokens
# name their trial without a foreign key, so they are found through the trials too.
_BY_TRIAL = "trial_id IN (SELECT id FROM trials WHERE experiment_id = ?)"
_DELETES: tuple[tuple[str, str], ...] = (
    ("metrics", _BY_TRIAL),
    ("logs", _BY_TRIAL),
    ("trial_tokens", _BY_TRIAL),
    ("allocations", _BY_TRIAL),
    ("checkpoints", "experiment_id = ?"),
    ("unmanaged_trials", "experiment_id = ?"),
    ("trials", "experiment_id = ?"),
    ("experiments", "id = ?"),
)


def delete_experiment_rows(store: Database, experiment_id: int) -> list[int]:
    """Delete the experiment and every row of its trials (metrics, logs, tokens, allocations,
    checkpoints); returns the ids its trials had. Its context stays here: contexts are
    shared by content hash (`Contexts.remove_if_unused` forgets one no experiment has)."""
    with store.transaction() as conn:
        trial_ids = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM trials WHERE experiment_id = ? ORDER BY id", (experiment_id,)
            ).fetchall()
        ]
        for table, where in _DELETES:
            conn.execute(f"DELETE FROM {table} WHERE {where}", (experiment_id,))
    return trial_ids


__all__ = ["delete_experiment_rows"]
