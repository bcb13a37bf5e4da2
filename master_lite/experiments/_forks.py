"""New experiments made from existing ones, with Determined's semantics:

* **fork** (WebUI "Fork", CreateExperiment with `parentId`): a new experiment from a parent's
  config (as edited) and the parent's model definition (its stored context);
* **re-run a trial** ("re-run with these hyperparameters"): a `single`-searcher experiment
  whose hyperparameters are the trial's, as constants, trained from scratch;
* **continue a trial** (WebUI "Continue Trial"): the same, but warm-started from the trial's
  latest checkpoint (`searcher.source_trial_id`), with a `max_length` of the user's choice.

Each new experiment records its parent (`parent_id`) and keeps the parent's notebook origin,
so "Use in notebook" and the end-of-experiment notification find the notebook it came from.
The config rewriting is pure (`trial_config`), so the CLI's preview and the tests share it.
"""

from __future__ import annotations

import copy
from typing import Any

from determined.common.states import CheckpointState
from master_lite import errors
from master_lite._core._auth import OWNER_ID
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.experiments._experiments import Experiments

# Keys of a searcher config that only the original search method reads: a `single` searcher
# refuses or ignores them, so the derived config leaves them out.
_SEARCHER_KEYS_KEPT = (
    "metric",
    "smaller_is_better",
    "max_length",
    "source_trial_id",
    "source_checkpoint_uuid",
)


def _const_hparams(spec: Any, values: Any) -> Any:
    """The hyperparameter space `spec` with every hyperparameter fixed to the trial's value
    (`values`), keeping nested groups nested as the parent declared them."""
    if isinstance(spec, dict) and "type" not in spec and isinstance(values, dict):
        return {key: _const_hparams(spec.get(key), value) for key, value in values.items()}
    return {"type": "const", "val": values}


def _with_length(max_length: Any, length: int) -> Any:
    """`length` in the parent's form: a plain number, or `{unit: n}` in its unit."""
    if isinstance(max_length, dict) and len(max_length) == 1:
        (unit,) = max_length
        return {unit: length}
    return length


def length_value(max_length: Any) -> int | None:
    """The number in a `max_length` (plain or `{unit: n}`); None when there is none."""
    if isinstance(max_length, dict) and len(max_length) == 1:
        (max_length,) = max_length.values()
    if isinstance(max_length, int) and not isinstance(max_length, bool):
        return max_length
    return None


def trial_config(
    parent: dict,
    trial_id: int,
    hparams: dict,
    *,
    continue_from_checkpoint: bool,
    max_length: int | None = None,
) -> dict:
    """The config of an experiment that trains one trial with `hparams` (the trial `trial_id`
    of the experiment whose expanded config is `parent`): a `single` search on the parent's
    metric, `max_length` (default: the parent's) in the parent's unit; warm-started from the
    trial's latest checkpoint when `continue_from_checkpoint`."""
    config = copy.deepcopy(parent)
    searcher = dict(parent.get("searcher") or {})
    new_searcher: dict[str, Any] = {"name": "single"}
    new_searcher.update({key: searcher[key] for key in _SEARCHER_KEYS_KEPT if key in searcher})
    if max_length is not None:
        new_searcher["max_length"] = _with_length(searcher.get("max_length"), max_length)
    if continue_from_checkpoint:
        new_searcher.pop("source_checkpoint_uuid", None)
        new_searcher["source_trial_id"] = trial_id
    config["searcher"] = new_searcher
    config["hyperparameters"] = _const_hparams(parent.get("hyperparameters") or {}, hparams)
    verb = "continued" if continue_from_checkpoint else "re-run"
    config["name"] = f"{parent.get('name') or 'Experiment'} (trial {trial_id} {verb})"
    return config


class Forks:
    """Fork an experiment; re-run or continue one of its trials as a new experiment."""

    def __init__(self, shared: MasterState, *, views: Views, experiments: Experiments) -> None:
        self._shared = shared
        self._views = views
        self._experiments = experiments

    def _parent_context(self, exp_id: int) -> bytes | None:
        """The parent's model definition; InvalidRequest for a run that trained in a kernel
        (nothing the master could run again)."""
        row = self._views.experiment_row(exp_id)
        if row.config.get("unmanaged"):
            raise errors.InvalidRequest(
                f"experiment {exp_id} trained in a Jupyter kernel (core_v2): the master has no "
                "model definition to run again; run its notebook again instead"
            )
        if not row.context_hash:
            return None  # created without a context (an entrypoint that needs no files)
        return self._experiments.get_experiment_context(exp_id)

    async def fork(
        self,
        parent_id: Any,
        config: dict | str,
        context: bytes | None = None,
        *,
        activate: bool = True,
        archived: bool = False,
        notebook: dict | None = None,
        owner_id: int = OWNER_ID,
        project_id: int | None = None,
    ) -> dict:
        """A new experiment from `config` and the parent's model definition (Determined's
        CreateExperiment with `parentId`; a `context` given replaces the parent's); its
        JSON. The parent's notebook origin is kept unless `notebook` names another."""
        parent = self._parent_row(parent_id)
        return await self._experiments.submit_experiment(
            config,
            context if context is not None else self._parent_context(parent.id),
            activate=activate,
            archived=archived,
            notebook=notebook if notebook is not None else parent.notebook,
            parent_id=parent.id,
            owner_id=owner_id,
            project_id=project_id,
        )

    async def from_trial(
        self,
        trial_id: int,
        *,
        continue_from_checkpoint: bool,
        max_length: int | None = None,
        activate: bool = True,
        owner_id: int = OWNER_ID,
    ) -> dict:
        """Re-run (`continue_from_checkpoint` False) or continue the trial as a new
        experiment; its JSON. A continue needs a checkpoint: as Determined's warm start, the
        new trial gets it as its `DET_LATEST_CHECKPOINT` (the weights carry over; whether the
        step count does is the training code's choice) and trains to `max_length`."""
        trial = self._views.trial_row(trial_id)
        parent = self._views.experiment_row(trial.experiment_id)
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
        ):
            raise errors.InvalidRequest(
                f"body.max_length: expected a positive integer, got {max_length!r}"
            )
        if continue_from_checkpoint:
            self._check_checkpoint(trial_id, trial.latest_checkpoint)
        config = trial_config(
            parent.config,
            trial_id,
            trial.hparams,
            continue_from_checkpoint=continue_from_checkpoint,
            max_length=max_length,
        )
        return await self._experiments.submit_experiment(
            config,
            self._parent_context(parent.id),
            activate=activate,
            notebook=parent.notebook,
            parent_id=parent.id,
            owner_id=owner_id,
        )

    def _parent_row(self, parent_id: Any) -> Any:
        if isinstance(parent_id, bool) or not isinstance(parent_id, int):
            raise errors.InvalidRequest(
                f"body.parent_id: expected an experiment id, got {parent_id!r}"
            )
        row = self._shared.store.experiments.get(parent_id)
        if row is None:
            raise errors.InvalidRequest(
                f"body.parent_id: experiment {parent_id} does not exist (fork an existing one)"
            )
        return row

    def _check_checkpoint(self, trial_id: int, latest: str | None) -> None:
        """A continue starts from the trial's latest checkpoint: it must exist."""
        row = self._shared.store.checkpoints.get(latest) if latest else None
        if row is None or row.state != CheckpointState.COMPLETED:
            raise errors.InvalidRequest(
                f"trial {trial_id} has no checkpoint to continue from (it never saved one, or "
                "it was deleted); re-run it with its hyperparameters instead"
            )


__all__ = ["Forks", "length_value", "trial_config"]
