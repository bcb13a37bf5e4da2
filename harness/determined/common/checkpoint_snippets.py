"""The code "Use in notebook" inserts for a checkpoint: download it with the SDK, then load it
with the loader of the framework that wrote it.

One rule for every place that offers it (the sidebar's checkpoint list and the live widget,
both through `GET /api/v1/checkpoints/{uuid}/snippet`): what wrote a checkpoint is read from
its metadata (`framework`, `format`, which the Trial APIs write); whatever else wrote it is a
Core API checkpoint, whose files are the user's own.
"""

from __future__ import annotations

import json
from typing import Any

KINDS = ("pytorch", "keras", "estimator", "core")


def checkpoint_kind(metadata: dict[str, Any] | None) -> str:
    """Which loader fits a checkpoint (one of KINDS), from the `framework` and `format` its
    metadata records: every Trial API writes them (PyTorchTrial `torch-<version>`/`pickle`,
    TFKerasTrial and the Keras Native API `tensorflow-<version>`/`keras`, EstimatorTrial
    `estimator`); a checkpoint without them was saved by a Core API script."""
    metadata = metadata or {}
    framework = str(metadata.get("framework") or "").lower()
    form = str(metadata.get("format") or "").lower()
    if framework.startswith("torch"):
        return "pytorch"
    if form == "estimator":
        return "estimator"
    if form == "keras" or framework.startswith("tensorflow"):
        return "keras"
    return "core"


_HEADER = """\
from determined.experimental import client

# Checkpoint {uuid_literal} of trial {trial_id} (experiment {experiment_id}), {steps} batches.
checkpoint = client.get_checkpoint({uuid_literal})
path = checkpoint.download()  # into ~/.cache/determined/checkpoints/<uuid>, once
"""

_LOADERS = {
    "pytorch": """\
# The trial class the checkpoint names is imported from the experiment's code.
import os
import sys
import tarfile

from determined import pytorch

code_dir = "checkpoints/experiment-{experiment_id}-code"
with tarfile.open(client.get_experiment({experiment_id}).download_code(code_dir)) as tar:
    # The "data" filter keeps every file inside code_dir; Pythons before 3.10.12 / 3.11.4
    # (Debian 12's 3.11.2) have no filters.
    safe = {{"filter": "data"}} if hasattr(tarfile, "data_filter") else {{}}
    tar.extractall(code_dir, **safe)
sys.path.insert(0, code_dir)
# Modules that a cell like this one imported from another experiment's code are forgotten:
# the same module name (model_def) must now mean this experiment's code.
others = os.path.abspath("checkpoints/experiment-")
for name, module in list(sys.modules.items()):
    file = os.path.abspath(getattr(module, "__file__", None) or ".")
    if file.startswith(others) and not file.startswith(os.path.abspath(code_dir) + os.sep):
        del sys.modules[name]
trial = pytorch.load_trial_from_checkpoint_path(path)
models = trial.context.models  # the trained models, in the order the trial wrapped them
""",
    "keras": """\
from determined import keras

model = keras.load_model_from_checkpoint_path(path)
""",
    "estimator": """\
from determined import estimator

loaded = estimator.load_estimator_from_checkpoint_path(path)
""",
    "core": """\
# A Core API checkpoint: `path` holds the files your script saved in it.
import os

print(sorted(os.listdir(path)))
""",
}


def checkpoint_snippet(checkpoint: dict[str, Any]) -> dict[str, str]:
    """The cell to insert for a checkpoint, as `{"kind", "code"}`.

    Args:
        checkpoint: the checkpoint's API JSON (`uuid`, `trial_id`, `experiment_id`,
            `steps_completed`, `metadata`).
    """
    kind = checkpoint_kind(checkpoint.get("metadata"))
    fields = {
        "uuid": checkpoint["uuid"],
        "uuid_literal": json.dumps(str(checkpoint["uuid"])),
        "trial_id": checkpoint.get("trial_id"),
        "experiment_id": int(checkpoint["experiment_id"]),
        "steps": checkpoint.get("steps_completed"),
    }
    code = _HEADER.format(**fields) + "\n" + _LOADERS[kind].format(**fields)
    return {"kind": kind, "code": code}


__all__ = ["KINDS", "checkpoint_kind", "checkpoint_snippet"]
