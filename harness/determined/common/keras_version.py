"""Which Keras a trial's code was written for: Keras 2 (tf_keras) for Determined-era code.

TensorFlow >= 2.16 makes `tf.keras` Keras 3 unless `TF_USE_LEGACY_KERAS=1` is in the
environment *before TensorFlow is imported*; Determined's programs (its `TFKerasTrial`s, 0.13's
Native API scripts, the examples that build `tf.keras.optimizers.legacy` optimizers) are Keras 2
code and fail under Keras 3 (`lr=`, `optimizers.legacy`, `fit_generator`). So whoever starts the
trial's process (the master, `determined.exec.harness` off the master, the Native API locally)
decides first, from the code's source text, without importing it:

* the user decides when the environment already has `TF_USE_LEGACY_KERAS` (any value) or
  `DET_KERAS_VERSION` (`2`: tf_keras, `3`: Keras 3, the opt-out);
* otherwise the code is Keras 2 code, and gets tf_keras, when a Python file defines a
  `TFKerasTrial`, calls the Native API (`det.experimental.keras.init`), or names Keras-2-only API
  (`optimizers.legacy`, `fit_generator`). A file that imports the `keras` package itself
  (`import keras`, `from keras... import`) is Keras 3 code and decides nothing (its
  `TFKerasTrial` stays Keras 3, as it is today);
* and only when tf_keras is installed where the code runs (else Keras 3, with its own errors).

Framework-free: reading source text only; nothing here imports TensorFlow or Keras.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

# The environment variable that opts in or out explicitly: "2" (tf_keras) or "3" (Keras 3).
CHOICE_VARIABLE = "DET_KERAS_VERSION"
LEGACY_VARIABLE = "TF_USE_LEGACY_KERAS"

_MAX_FILES = 100  # a context's Python files read at most (the first found, sorted): bounded work
_MAX_BYTES = 256 * 1024  # of each file (the master reads them when it starts a run)

_KERAS3_IMPORT = re.compile(r"^\s*(?:import\s+keras\b|from\s+keras(?:\.[\w.]+)?\s+import\b)", re.M)
_KERAS2_SIGNS = (
    (re.compile(r"\bTFKerasTrial\b"), "a TFKerasTrial"),
    (
        re.compile(r"\bexperimental\.keras\s+import\s+[^\n]*\binit\b|experimental\.keras\.init\("),
        "the Native API (det.experimental.keras.init)",
    ),
    (
        re.compile(r"\boptimizers\.legacy\b|\boptimizers\s+import\s+[^\n]*\blegacy\b"),
        "optimizers.legacy",
    ),
    (re.compile(r"\.fit_generator\("), "fit_generator"),
)


def keras2_reason(source: str) -> str | None:
    """Why `source` (one Python file's text) is Keras 2 code, or None when it is not."""
    if _KERAS3_IMPORT.search(source):
        return None
    for pattern, what in _KERAS2_SIGNS:
        if pattern.search(source):
            return what
    return None


def python_files(directory: Path) -> list[Path]:
    """The context's Python files to read (sorted, bounded), hidden directories skipped."""
    found: list[Path] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                found.append(Path(root) / name)
                if len(found) >= _MAX_FILES:
                    return found
    return found


def keras2_reason_in(files: Iterable[Path], base: Path | None = None) -> str | None:
    """`"<file>: <why>"` for the first of `files` that is Keras 2 code, else None."""
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                source = f.read(_MAX_BYTES)
        except OSError:
            continue
        why = keras2_reason(source)
        if why:
            shown = (
                path.relative_to(base) if base is not None and path.is_relative_to(base) else path
            )
            return f"{shown}: {why}"
    return None


def user_choice(env: Mapping[str, str]) -> str | None:
    """`"2"`/`"3"` when the environment says which Keras (explicitly), else None."""
    if LEGACY_VARIABLE in env:
        return "2" if env[LEGACY_VARIABLE] in ("1", "true", "True") else "3"
    choice = env.get(CHOICE_VARIABLE, "").strip()
    if choice in ("2", "3"):
        return choice
    return None


def tf_keras_installed() -> bool:
    """Whether this interpreter can import tf_keras (without importing it)."""
    return importlib.util.find_spec("tf_keras") is not None


def legacy_environment(
    env: Mapping[str, str], files: Iterable[Path], base: Path | None = None
) -> tuple[dict[str, str], str | None]:
    """The variables to add to a process's environment so Keras-2 code gets tf_keras, and a log
    line saying why (None when nothing is added).

    `env` is the environment the process will have (the user's variables included); `files`
    its Python code. `DET_KERAS_VERSION=2` asks for tf_keras whatever the code says."""
    choice = user_choice(env)
    if choice == "3" or (choice == "2" and LEGACY_VARIABLE in env):
        return {}, None
    if choice == "2":
        reason = f"{CHOICE_VARIABLE}=2"
    else:
        found = keras2_reason_in(files, base)
        if found is None:
            return {}, None
        reason = f"Keras 2 code ({found})"
    if not tf_keras_installed():
        return {}, (
            f"{reason}, but tf_keras is not installed here: tf.keras stays Keras 3 "
            "(pip install --no-deps 'tf-keras==<TensorFlow's major.minor>.*')"
        )
    return {LEGACY_VARIABLE: "1"}, (
        f"tf.keras is tf_keras (Keras 2) for this trial: {reason}; "
        f"set {CHOICE_VARIABLE}=3 in environment_variables for Keras 3"
    )


__all__ = [
    "CHOICE_VARIABLE",
    "LEGACY_VARIABLE",
    "keras2_reason",
    "keras2_reason_in",
    "legacy_environment",
    "python_files",
    "tf_keras_installed",
    "user_choice",
]
