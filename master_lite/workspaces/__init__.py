"""Workspaces and projects (Determined's): how experiments are grouped on a shared master
(docs/team.md, "Workspaces and projects").

* `Workspaces` (_workspaces.py): the part: workspaces, projects, moving experiments.
* `place_experiment` (_placement.py): the project a new experiment goes into.
* `workspace_json`, `project_json` (_json.py): Determined's objects.
* `fill_default_pool` (_scheduling.py): a workspace's default resource pool for a new
  experiment (its slot quota is the scheduler's, given by `Workspaces.apply_quotas`).
"""

from ._json import project_json, workspace_json
from ._placement import place_experiment
from ._scheduling import fill_default_pool
from ._workspaces import Workspaces

__all__ = [
    "Workspaces",
    "fill_default_pool",
    "place_experiment",
    "project_json",
    "workspace_json",
]
