"""Contexts packed as Determined's CLI and SDK pack them.

Determined's e2e fixtures (`e2e_tests/tests/fixtures/mnist_pytorch/`) hold `data.py` and
`model_def.py` as symbolic links into `examples/`, outside the context directory: Determined
packs each linked file's content, and skips (with a message naming it) what it cannot read. The
master's own checks of uploaded archives (no links leaving the destination) are not this: the
client's archive holds no links at all.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from determined.common import context
from tests._support import MasterProcess, trial_logs, trials, wait_for_experiment


def members(packed: bytes) -> dict[str, bytes | None]:
    """name -> content (None for a directory) of a packed context."""
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        found: dict[str, bytes | None] = {}
        for member in tar.getmembers():
            assert member.isreg() or member.isdir(), member.name  # never a link
            extracted = tar.extractfile(member) if member.isreg() else None
            found[member.name] = extracted.read() if extracted else None
        return found


@pytest.fixture
def e2e_layout(tmp_path: Path) -> Path:
    """Determined's e2e layout: a fixture directory whose code links into examples/."""
    example = tmp_path / "examples" / "tutorials" / "mnist_pytorch"
    example.mkdir(parents=True)
    (example / "data.py").write_text("def load():\n    return [1, 2, 3]\n")
    (example / "model_def.py").write_text("from data import load\nVALUES = load()\n")
    fixture = tmp_path / "e2e_tests" / "tests" / "fixtures" / "mnist_pytorch"
    fixture.mkdir(parents=True)
    (fixture / "data.py").symlink_to(Path("../../../../examples/tutorials/mnist_pytorch/data.py"))
    (fixture / "model_def.py").symlink_to(example / "model_def.py")  # absolute, too
    (fixture / "const.yaml").write_text("name: fixture\n")
    return fixture


def test_links_to_files_outside_the_context_are_packed_as_their_content(
    e2e_layout: Path,
) -> None:
    warnings: list[str] = []
    packed = members(context.pack(e2e_layout, warn=warnings.append))
    assert packed == {
        "const.yaml": b"name: fixture\n",
        "data.py": b"def load():\n    return [1, 2, 3]\n",
        "model_def.py": b"from data import load\nVALUES = load()\n",
    }
    assert warnings == []


def test_broken_and_unreadable_entries_are_skipped_with_a_warning_naming_them(
    e2e_layout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (e2e_layout / "gone.py").symlink_to(e2e_layout / "no-such-file.py")
    (e2e_layout / "loop").symlink_to("loop")
    os.mkfifo(e2e_layout / "pipe")
    secret = e2e_layout / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    try:
        unreadable = not os.access(secret, os.R_OK)  # root reads everything
        warnings: list[str] = []
        packed = members(context.pack(e2e_layout, warn=warnings.append))
        assert sorted(packed) == ["const.yaml", "data.py", "model_def.py"] + (
            [] if unreadable else ["secret.txt"]
        )
        text = "\n".join(warnings)
        assert "symbolic link gone.py is broken or unreadable" in text
        assert "symbolic link loop is broken or unreadable" in text
        assert "pipe is not a regular file or directory" in text
        assert ("secret.txt cannot be read" in text) == unreadable
        # Without a `warn`, the warnings are lines on stderr (what the CLI user sees).
        context.pack(e2e_layout)
        assert "warning: symbolic link gone.py is broken" in capsys.readouterr().err
    finally:
        secret.chmod(0o600)


def test_a_detignored_broken_link_is_skipped_silently(e2e_layout: Path) -> None:
    (e2e_layout / "gone.py").symlink_to(e2e_layout / "no-such-file.py")
    (e2e_layout / ".detignore").write_text("gone.py\n")
    warnings: list[str] = []
    assert "gone.py" not in members(context.pack(e2e_layout, warn=warnings.append))
    assert warnings == []


def test_a_link_to_a_directory_outside_is_packed_empty_with_a_warning(
    e2e_layout: Path, tmp_path: Path
) -> None:
    (e2e_layout / "home").symlink_to(tmp_path)
    warnings: list[str] = []
    packed = members(context.pack(e2e_layout, warn=warnings.append))
    assert packed["home"] is None and not [name for name in packed if name.startswith("home/")]
    assert len(warnings) == 1 and "symbolic link home points to a directory outside" in warnings[0]


def test_the_size_limit_counts_the_content_of_linked_files(
    e2e_layout: Path, tmp_path: Path
) -> None:
    big = tmp_path / "weights.bin"
    big.write_bytes(b"0" * 20_000)
    (e2e_layout / "weights.bin").symlink_to(big)
    with pytest.raises(context.ContextTooLarge, match=r"weights\.bin"):
        context.pack(e2e_layout, limit_bytes=10_000)


TRAIN = """
from determined import core
import model_def
with core.init() as ctx:
    ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": float(sum(model_def.VALUES))})
print("imported through the links", model_def.VALUES, flush=True)
"""


def test_an_experiment_from_a_linked_context_runs(
    e2e_layout: Path, start_master: Callable[..., MasterProcess]
) -> None:
    from determined.common.experimental.determined import Determined

    master = start_master()
    (e2e_layout / "train.py").write_text(TRAIN)
    (e2e_layout / "const.yaml").write_text(
        "name: linked\nentrypoint: python3 train.py\nmax_restarts: 0\n"
        "searcher: {name: single, metric: loss, max_length: 1}\n"
    )
    sdk = Determined._from_session(master.session)
    experiment = sdk.create_experiment(config=e2e_layout / "const.yaml", model_dir=e2e_layout)
    assert wait_for_experiment(master, experiment.id)["state"] == "COMPLETED"
    (trial,) = trials(master, experiment.id)
    lines = [entry["line"] for entry in trial_logs(master, trial["id"])]
    assert any("imported through the links [1, 2, 3]" in line for line in lines), lines
