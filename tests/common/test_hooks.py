"""determined.common.hooks: the harness asks, the package that has it registers (found by its
`_determined_hooks` module on sys.path, no package metadata needed)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import determined
from determined.common import harness, hooks

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_registry(monkeypatch):
    monkeypatch.setattr(hooks, "_registered", {})
    monkeypatch.setattr(hooks, "_imported_providers", set())


def only_providers_in(tmp_path: Path, monkeypatch) -> None:
    """Look for providers in `tmp_path` only: the real ones, once imported into a throwaway
    registry, would not register again in the process's own."""
    monkeypatch.syspath_prepend(str(tmp_path))
    search = hooks.provider_modules
    monkeypatch.setattr(hooks, "provider_modules", lambda path=None: search([str(tmp_path)]))


def provider(root: Path, package: str, body: str) -> None:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "_determined_hooks.py").write_text(
        "from determined.common import hooks\n" + body
    )


def test_providers_are_the_packages_with_a_hooks_module_in_path_order(tmp_path):
    provider(tmp_path / "a", "zeta_pkg", "")
    provider(tmp_path / "a", "alpha_pkg", "")
    provider(tmp_path / "b", "zeta_pkg", "")  # shadowed by the first one, as in an import
    (tmp_path / "a" / "not_a_package").mkdir()
    (tmp_path / "a" / "not_a_package" / "_determined_hooks.py").write_text("")
    path = [str(tmp_path / "a"), str(tmp_path / "missing"), str(tmp_path / "b")]
    assert hooks.provider_modules(path) == [
        "alpha_pkg._determined_hooks",
        "zeta_pkg._determined_hooks",
    ]


def test_a_hook_is_found_by_importing_its_provider_on_first_use(
    tmp_path, monkeypatch, fresh_registry
):
    provider(tmp_path, "hook_provider_x", "hooks.register('shout', str.upper)\n")
    only_providers_in(tmp_path, monkeypatch)
    assert "hook_provider_x" not in sys.modules
    assert hooks.get("shout")("ok") == "OK"
    assert "hook_provider_x._determined_hooks" in sys.modules
    assert hooks.get("no such hook") is None


def test_a_registered_hook_needs_no_search(monkeypatch, fresh_registry):
    monkeypatch.setattr(hooks, "provider_modules", lambda path=None: pytest.fail("searched"))
    hooks.register("double", lambda x: 2 * x)
    assert hooks.get("double")(4) == 8
    with pytest.raises(ValueError, match="hook: bad must be callable"):
        hooks.register("bad", 3)  # type: ignore[arg-type]


def test_a_broken_provider_is_reported_and_the_others_still_work(
    tmp_path, monkeypatch, caplog, fresh_registry
):
    provider(tmp_path, "hook_broken_a", "raise ImportError('needs a missing package')\n")
    provider(tmp_path, "hook_working_b", "hooks.register('answer', lambda: 42)\n")
    only_providers_in(tmp_path, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="determined.common.hooks"):
        assert hooks.get("answer")() == 42
    assert (
        "hook_broken_a._determined_hooks cannot be imported: ImportError: needs a missing"
        in caplog.text
    )


def test_a_fresh_interpreter_finds_the_master_and_jupyter_hooks_without_importing_them():
    """What `det preview-search` and the Native API in a kernel rely on: nothing imported
    master_lite or jupyter_determined, and no entry points (package metadata) are involved."""
    code = (
        "import json, sys\nfrom determined.common import hooks\n"
        "before = sorted(m for m in sys.modules if m.startswith(('master_lite', 'jupyter_determined')))\n"
        "found = {name: getattr(hooks.get(name), '__module__', None) for name in "
        "(hooks.SEARCH_PREVIEW, hooks.NOTEBOOK_SCRIPT, hooks.NOTEBOOK_SUBMITTED)}\n"
        "print(json.dumps({'before': before, 'found': found}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "harness"), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["before"] == []
    assert result["found"] == {
        "search_preview": "master_lite._determined_hooks",
        "notebook_script": "jupyter_determined.kernel._current_notebook",
        "notebook_submitted": "jupyter_determined",
    }


def test_what_the_master_knows_of_the_harness():
    assert harness.VERSION == determined.__version__
    assert Path(harness.PRESTARTED_SCRIPT) == (
        Path(determined.__file__).resolve().parent / "exec" / "prestarted.py"
    )
    assert Path(harness.PRESTARTED_SCRIPT).is_file()
