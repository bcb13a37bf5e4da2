"""Where an experiment is and whose it is, as list filters (migration 9): the SQL conditions
the experiment list adds for `project_id`, `workspace_id` and owners (`user_ids`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def place_filters(
    where: str,
    params: Sequence[Any],
    *,
    project_id: int | None = None,
    workspace_id: int | None = None,
    user_ids: Sequence[int] | None = None,
) -> tuple[str, list[Any]]:
    """`where` (on the experiments table) narrowed to the given project, workspace and
    owners; None leaves a filter out."""
    conditions = [where] if where else []
    values = list(params)
    if project_id is not None:
        conditions.append("project_id = ?")
        values.append(int(project_id))
    if workspace_id is not None:
        conditions.append("project_id IN (SELECT id FROM projects WHERE workspace_id = ?)")
        values.append(int(workspace_id))
    if user_ids is not None:
        ids = [int(user_id) for user_id in user_ids]
        conditions.append(f"owner_id IN ({', '.join('?' for _ in ids)})" if ids else "0")
        values.extend(ids)
    return " AND ".join(conditions), values


__all__ = ["place_filters"]
