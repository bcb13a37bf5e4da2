"""Checks of a new experiment that need no state of the experiments part: its config
(expanded, checked against the runner, its searcher made) and its warm-start checkpoint."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from determined.common import expconf
from determined.common.states import CheckpointState
from master_lite import errors
from master_lite._core import _limits
from master_lite._core._secrets import submitted_secrets
from master_lite._core._shared import searcher_module
from master_lite.checkpoints import storage_problem
from master_lite.runners import Runner, fold_jupyter_gateway
from master_lite.store import Store


def checked_config(
    config: dict | str,
    *,
    root_dir: Path,
    runner: Runner | None,
    parent_config: dict | None = None,
    storage_roots: Sequence[Path] = (),
) -> tuple[dict, str, Any]:
    """The expanded config, the text it was given as and its searcher; InvalidRequest
    naming every problem. (Cheap: no file work.) `parent_config`: a fork's parent, whose
    secrets replace the stars of redacted ones; `storage_roots`: where checkpoint storage
    may lie besides `<root_dir>/checkpoints`."""
    if isinstance(config, str):
        original_text = config
        try:
            config = expconf.load(config, source="config")
        except expconf.InvalidConfig as exc:
            raise errors.InvalidRequest(
                f"invalid experiment config: {exc}", list(exc.errors)
            ) from exc
        except ValueError as exc:
            raise errors.InvalidRequest(f"invalid experiment config: {exc}") from exc
        except RecursionError:  # YAML's parser recurses per level of nesting
            problem = f"config: nested deeper than {_limits.MAX_JSON_DEPTH} levels"
            raise errors.InvalidRequest(problem, [problem]) from None
        # The text may nest as deep as the parser allows; a body's limits hold for it too.
        where = _limits.body_problem(config, "config")
        if where:
            raise errors.InvalidRequest(f"invalid experiment config: {where}", [where])
    elif isinstance(config, dict):
        original_text = json.dumps(config)
    else:
        raise errors.InvalidRequest("config: expected a YAML/JSON string or an object")
    config = submitted_secrets(config, parent_config)
    try:
        expconf.check(config)
    except expconf.InvalidConfig as exc:
        problems = list(exc.errors)
        raise errors.InvalidRequest(
            f"invalid experiment config: {len(problems)} error(s): " + "; ".join(problems),
            problems,
        ) from exc
    problems = _limits.config_problems(config)  # sizes: name, labels, resources (docs: Limits)
    if problems:
        raise errors.InvalidRequest(
            f"invalid experiment config: {len(problems)} error(s): " + "; ".join(problems),
            problems,
        )
    expanded = expconf.apply_defaults(
        config,
        default_checkpoint_storage={
            "type": "shared_fs",
            "host_path": str(root_dir / "checkpoints"),
            "storage_path": ".",
        },
    )
    # `environment.jupyter_gateway` is stored as the `environment.kernel.gateway` it means.
    expanded, problems = fold_jupyter_gateway(expanded)
    # Where trials will run (an image that exists, a runtime that is installed): now, not
    # when the first trial fails.
    if not problems and runner is not None:
        problems = runner.config_problems(expanded)
    # The master serves and deletes what lies in checkpoint storage: a config may put it
    # only where the master's configuration allows (issue 26).
    storage_issue = storage_problem(expanded["checkpoint_storage"], storage_roots)
    if storage_issue:
        problems = [*problems, storage_issue]
    if problems:
        raise errors.InvalidRequest(
            f"invalid experiment config: {len(problems)} error(s): " + "; ".join(problems),
            problems,
        )
    module = searcher_module()
    try:
        searcher = module.make_searcher(expanded)
    except ValueError as exc:
        raise errors.InvalidRequest(f"searcher: {exc}", [f"searcher: {exc}"]) from exc
    return expanded, original_text, searcher


def warm_start_checkpoint(store: Store, searcher_config: dict) -> str | None:
    """The checkpoint every trial of a new experiment starts from, checked now: a source
    that does not exist is an error at creation, naming the field."""
    uuid = searcher_config.get("source_checkpoint_uuid")
    trial_id = searcher_config.get("source_trial_id")
    if uuid is not None and trial_id is not None:
        message = (
            "searcher.source_trial_id and searcher.source_checkpoint_uuid: set at "
            "most one (the warm start comes from one checkpoint)"
        )
        raise errors.InvalidRequest(message, [message])
    if uuid is not None:
        row = store.checkpoints.get(str(uuid))
        if row is None or row.state != CheckpointState.COMPLETED:
            why = "does not exist" if row is None else f"is {row.state}"
            message = (
                f"searcher.source_checkpoint_uuid: checkpoint {uuid} {why} "
                "(pick one from `det checkpoint list`)"
            )
            raise errors.InvalidRequest(message, [message])
        return str(uuid)
    if trial_id is not None:
        trial = store.trials.get(int(trial_id))
        if trial is None:
            message = f"searcher.source_trial_id: trial {trial_id} does not exist"
            raise errors.InvalidRequest(message, [message])
        latest = trial.latest_checkpoint
        row = store.checkpoints.get(latest) if latest else None
        if row is None or row.trial_id != trial.id or row.state != CheckpointState.COMPLETED:
            message = (
                f"searcher.source_trial_id: trial {trial_id} has no checkpoint to "
                "start from (it never reported one, or it was deleted)"
            )
            raise errors.InvalidRequest(message, [message])
        return str(latest)
    return None


__all__ = ["checked_config", "warm_start_checkpoint"]
