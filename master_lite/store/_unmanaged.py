"""The `unmanaged_trials` table: trials that train in a kernel the master does not start."""

from __future__ import annotations

from typing import Any

from ._repositories import TypedRepository
from ._rows import UnmanagedTrialRow


class UnmanagedTrials(TypedRepository[UnmanagedTrialRow]):
    """The `unmanaged_trials` table (migration 6)."""

    row_type = UnmanagedTrialRow

    def create(self, **values: Any) -> None:
        """Insert the unmanaged side of a new trial (column=value)."""
        self._insert(**values)

    def resume(
        self,
        trial_id: int,
        *,
        token_hash: str,
        lease_seconds: float,
        lease_expires: float,
        host: str,
    ) -> None:
        """A kernel resumes the trial: its new token, lease and host."""
        self._update(
            trial_id,
            token_hash=token_hash,
            lease_seconds=lease_seconds,
            lease_expires=lease_expires,
            host=host,
        )

    def renew_lease(self, trial_id: int, lease_expires: float) -> None:
        """The kernel's heartbeat: its lease runs until `lease_expires`."""
        self._update(trial_id, lease_expires=lease_expires)

    def close_lease(self, trial_id: int) -> None:
        """The run ended: no lease, and its token no longer authenticates."""
        self._update(trial_id, lease_expires=None, token_hash=None)

    def by_external_ids(
        self, external_experiment_id: str, external_trial_id: str
    ) -> UnmanagedTrialRow | None:
        """The trial a run with these external ids opened before, or None."""
        rows = self._select(
            "external_experiment_id = ? AND external_trial_id = ?",
            (external_experiment_id, external_trial_id),
            order="trial_id",
        )
        return rows[0] if rows else None

    def experiment_of_external(self, external_experiment_id: str) -> int | None:
        """The experiment whose trials carry this external experiment id, or None."""
        rows = self._select(
            "external_experiment_id = ?", (external_experiment_id,), order="trial_id"
        )
        return rows[0].experiment_id if rows else None

    def by_token(self, token_hash: str) -> UnmanagedTrialRow | None:
        """The live trial whose kernel holds this token, or None."""
        rows = self._select("token_hash = ?", (token_hash,), order="trial_id")
        return rows[0] if rows else None

    def live(self) -> list[UnmanagedTrialRow]:
        """Trials whose kernel holds a lease, earliest deadline first."""
        return self._select("lease_expires IS NOT NULL", order="lease_expires")

    def experiment_ids(self) -> set[int]:
        """Every experiment that has unmanaged trials."""
        rows = self._store.select(UnmanagedTrialRow.TABLE, order="trial_id")
        return {row["experiment_id"] for row in rows}

    def is_unmanaged_experiment(self, experiment_id: int) -> bool:
        """Whether the experiment's trials train outside the master."""
        return bool(self._select("experiment_id = ?", (experiment_id,), order="trial_id"))


__all__ = ["UnmanagedTrials"]
