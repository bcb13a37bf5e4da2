"""The magics without a reachable master: a usage error that says what was tried and what to
do, in about a second (no Jupyter server needed)."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from traitlets.config import Config

from jupyter_determined.kernel._current_notebook import frontend_notebook


@pytest.fixture
def shell(monkeypatch, tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    for name in (
        "DET_MASTER",
        "DET_MASTER_ADDR",
        "DET_MASTER_TOKEN",
        "DET_SESSION_TOKEN",
        "JPY_SESSION_NAME",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path / "root"))
    monkeypatch.setattr(frontend_notebook, "snapshot", None)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    instance = InteractiveShell.instance(config=config)
    (tmp_path / "ctx").mkdir()
    instance.user_ns["CTX"] = str(tmp_path / "ctx")
    assert instance.run_cell("%load_ext jupyter_determined").success
    yield instance
    InteractiveShell.clear_instance()


def run(shell, source: str) -> None:
    result = shell.run_cell(source, store_history=True)
    if not result.success:
        raise result.error_in_exec or result.error_before_exec


def test_det_submit_to_a_refused_master_says_what_was_tried(
    shell, monkeypatch, tmp_path, refused_port, connect_backoff
):
    url = f"http://127.0.0.1:{refused_port}"
    monkeypatch.setenv("DET_MASTER", url)
    with pytest.raises(UsageError) as refused:
        run(shell, "%%det_submit --context $CTX --no-widget\nprint('training')")
    # The cell gives up after two quick retries, not a background client's ~5 s of them.
    assert len(connect_backoff) == 2 and sum(connect_backoff) < 1, connect_backoff
    message = str(refused.value)
    assert message.startswith(
        "%%det_submit: the experiment was not submitted: cannot reach the "
        f"master at {url}: [Errno 111] Connection refused"
    )
    assert f"DET_MASTER={url}" in message
    assert str(tmp_path / "root" / "master.json") in message
    assert "master-lite" in message and "JupyterLab" in message
    assert "refused the experiment" not in message


def test_det_commands_without_any_master_are_a_usage_error(shell):
    with pytest.raises(UsageError) as refused:
        run(shell, "%det list")
    message = str(refused.value)
    assert message.startswith("%det list: no master found; looked at:")
    assert "DET_MASTER: not set" in message and "master-lite" in message


def test_det_submit_of_a_too_large_context_is_one_message_not_a_traceback(shell, tmp_path):
    # A sparse file: over the limit by its size, without writing 100 MB.
    with open(tmp_path / "ctx" / "weights.bin", "wb") as big:
        big.truncate(100 * 1024 * 1024)
    with pytest.raises(UsageError) as refused:  # IPython shows a UsageError as its message only
        run(shell, "%%det_submit --context $CTX --no-widget\nprint('training')")
    message = str(refused.value)
    assert message.startswith("%%det_submit: the experiment was not submitted: context ")
    assert "over the 96.0 MB limit; largest files: weights.bin (100.0 MB)" in message
    assert "/weights.bin" in message and ".detignore" in message and "\n" not in message
