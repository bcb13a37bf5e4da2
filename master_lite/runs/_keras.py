"""Keras 2 (tf_keras) for Determined-era Keras code, decided before the trial's process starts.

`TF_USE_LEGACY_KERAS=1` only works when set before TensorFlow is imported, so the master sets it
in the run's environment when the context's code is Keras 2 code (the rule and the opt-out,
`DET_KERAS_VERSION=3`, are in `determined.common.keras_version` and docs/compatibility-keras.md).
Only for runs on this host (processes, kernels, stand-ins for Determined's images): whether an
image has tf_keras is not known here, so a container's environment is left as configured.
"""

from __future__ import annotations

import os
from pathlib import Path


def keras_environment(
    work_dir: Path, env: dict[str, str], *, in_container: bool
) -> tuple[dict[str, str], str | None]:
    """Variables to add to a run's environment `env` (its own variables) for its code in
    `work_dir`, and the line for the trial's log (None: nothing to say)."""
    if in_container:
        return {}, None
    from determined.common import keras_version

    seen = {**os.environ, **env}  # a host process inherits the master's environment
    return keras_version.legacy_environment(
        seen, keras_version.python_files(work_dir), base=work_dir
    )
