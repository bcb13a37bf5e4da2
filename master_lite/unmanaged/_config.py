"""The experiment config of an unmanaged run (core_v2): what its open request becomes."""

from __future__ import annotations

from typing import Any

from determined.common import expconf
from master_lite import errors
from master_lite._core import _limits

# The entrypoint shown for a run the master does not start (configs require one).
KERNEL_ENTRYPOINT = "(trains in a Jupyter kernel: det.experimental.core_v2)"


def unmanaged_config(body: dict, *, default_checkpoint_storage: dict) -> dict:
    """The expanded experiment config of a run's `name`, `hparams`, `searcher`,
    `checkpoint_storage`, `description`, `labels`, `data`, `workspace`, `project`, checked
    like any config."""
    hparams = body.get("hparams") or {}
    if not isinstance(hparams, dict):
        raise errors.InvalidRequest(
            f"hparams: expected an object of hyperparameter values, got {hparams!r}",
            ["hparams: expected an object"],
        )
    searcher = dict(body.get("searcher") or {})
    searcher.setdefault("metric", "loss")
    # Searcher "single" names the experiment a single trial; the length is a placeholder (the
    # kernel, not a searcher, decides how long it trains).
    searcher.update(name="single", max_length={"batches": 1})
    config: dict[str, Any] = {
        "name": str(body.get("name") or "unmanaged"),
        "entrypoint": KERNEL_ENTRYPOINT,
        "hyperparameters": {k: {"type": "const", "val": v} for k, v in hparams.items()},
        "searcher": searcher,
    }
    for key in ("description", "labels", "data", "checkpoint_storage", "workspace", "project"):
        if body.get(key) is not None:
            config[key] = body[key]
    try:
        expconf.check(config)
        problems = _limits.config_problems(config)  # sizes: name, labels (docs: Limits)
    except expconf.InvalidConfig as exc:
        problems = list(exc.errors)
    if problems:
        raise errors.InvalidRequest(
            f"invalid core_v2 config: {len(problems)} error(s): " + "; ".join(problems), problems
        )
    expanded = expconf.apply_defaults(config, default_checkpoint_storage=default_checkpoint_storage)
    expanded["unmanaged"] = True  # Determined's expconf field: the master runs nothing
    return expanded


__all__ = ["KERNEL_ENTRYPOINT", "unmanaged_config"]
