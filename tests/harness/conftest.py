"""Fixtures shared by the harness tests."""

from __future__ import annotations

import pathlib
import shutil

import pytest

DIGITS_EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch_digits"


@pytest.fixture
def digits_context(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of examples/pytorch_digits with a short `local.yaml` checkpointing under tmp_path."""
    work = tmp_path / "context"
    shutil.copytree(DIGITS_EXAMPLE, work)
    config = (work / "const.yaml").read_text()
    config = config.replace("batches: 200", "batches: 20").replace("batches: 100", "batches: 10")
    config += (
        f"checkpoint_storage:\n  type: shared_fs\n  host_path: {tmp_path}\n  storage_path: ckpts\n"
    )
    (work / "local.yaml").write_text(config)
    return work
