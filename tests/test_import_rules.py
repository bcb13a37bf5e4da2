"""Who may import whom (docs: /work/shared/design/ARCHITECTURE.md, "Who may import whom").

    jupyter_determined  -->  master_lite, determined (its public modules)
    master_lite         -->  determined.common only (config schema, shared enums, storage layout)
    determined          -->  neither master_lite nor jupyter_determined (HTTP only to the master)

Every .py file of the three packages is parsed (nothing is imported) and every import in it is
checked wherever it stands (module level, in a function, under `if`/`try`): `import a.b`,
`from a.b import c`, relative imports (resolved against the file's package), and
`importlib.import_module("a.b")` / `__import__("a.b")` with a literal name. Where the harness
needs something only the master or Jupyter has, it asks `determined.common.hooks` instead.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# package name -> its directory, relative to the repository
PACKAGES = {
    "determined": "harness/determined",
    "master_lite": "master_lite",
    "jupyter_determined": "jupyter_determined",
}
IGNORED_DIRS = {"__pycache__", "node_modules", "labextension"}


@dataclasses.dataclass(frozen=True)
class Import:
    path: Path  # the importing file
    line: int
    target: str  # the absolute dotted name imported (for `from a import b`: "a.b")


def module_name(package: str, package_dir: Path, path: Path) -> str:
    parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _literal_import_call(node: ast.Call) -> str | None:
    """The module named by `importlib.import_module("x")`, `import_module("x")` or
    `__import__("x")`, when it is a string literal."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def imports_of(path: Path, module: str, is_package: bool) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # A relative import is resolved against the package holding the module.
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(path, node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package_parts[: len(package_parts) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found += [
                Import(path, node.lineno, base if alias.name == "*" else f"{base}.{alias.name}")
                for alias in node.names
            ]
        elif isinstance(node, ast.Call):
            target = _literal_import_call(node)
            if target and not target.startswith("."):
                found.append(Import(path, node.lineno, target))
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def broken_rule(importer: str, target: str) -> str | None:
    """Why `importer` (a top-level package) may not import `target`, or None if it may."""
    parts = target.split(".")
    top = parts[0]
    if top not in PACKAGES or top == importer:
        return None
    if importer == "determined":
        return (
            f"the harness (determined) never imports {top}: it talks to the master over "
            "HTTP only; for what only the master or Jupyter has, use a hook "
            "(determined.common.hooks) that the other side registers"
        )
    if importer == "master_lite":
        if top == "jupyter_determined":
            return (
                "master_lite never imports jupyter_determined (the Jupyter glue imports the master)"
            )
        if parts[:2] != ["determined", "common"]:
            return (
                "master_lite imports only determined.common from the harness (config schema, "
                "shared enums, storage layout)"
            )
    if any(_is_private(part) for part in parts[1:]):
        return (
            f"{importer} may import {top} only through its public modules and names, not "
            f"the private {target} (give it a public name)"
        )
    return None


def python_files(package_dir: Path) -> list[Path]:
    return sorted(
        path
        for path in package_dir.rglob("*.py")
        if not IGNORED_DIRS.intersection(path.relative_to(package_dir).parts)
    )


def import_violations(repo: Path = REPO) -> list[str]:
    """'file:line: imports X: <rule>' for every import in the three packages that breaks a rule."""
    problems: list[tuple[str, int, str]] = []
    for package, relative_dir in PACKAGES.items():
        package_dir = repo / relative_dir
        for path in python_files(package_dir):
            module = module_name(package, package_dir, path)
            for found in imports_of(path, module, path.name == "__init__.py"):
                rule = broken_rule(package, found.target)
                if rule:
                    problems.append(
                        (str(path.relative_to(repo)), found.line, f"imports {found.target}: {rule}")
                    )
    return [f"{path}:{line}: {text}" for path, line, text in sorted(problems)]


def test_the_packages_import_only_what_the_architecture_allows() -> None:
    problems = import_violations()
    assert not problems, "imports that break the rules in ARCHITECTURE.md:\n" + "\n".join(problems)


def test_every_package_has_python_files_to_check() -> None:
    for relative_dir in PACKAGES.values():
        assert len(python_files(REPO / relative_dir)) > 3, relative_dir


# --- the checker itself, on a made-up tree -------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path):
    for relative_dir in PACKAGES.values():
        (tmp_path / relative_dir).mkdir(parents=True)
        (tmp_path / relative_dir / "__init__.py").write_text("")

    def write(relative_path: str, source: str) -> Path:
        path = tmp_path / relative_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return tmp_path

    return write


def test_an_import_inside_a_function_is_found_with_its_file_and_line(tree) -> None:
    repo = tree(
        "harness/determined/cli/_tool.py",
        "import os\n\ndef run():\n    if os:\n        from master_lite import searcher\n",
    )
    [problem] = import_violations(repo)
    assert problem.startswith(
        "harness/determined/cli/_tool.py:5: imports master_lite.searcher: "
        "the harness (determined) never imports master_lite"
    )


@pytest.mark.parametrize(
    "source, target",
    [
        ("import jupyter_determined\n", "jupyter_determined"),
        ("import jupyter_determined._export as e\n", "jupyter_determined._export"),
        ("from jupyter_determined import *\n", "jupyter_determined"),
        (
            "import importlib\nimportlib.import_module('master_lite.searcher')\n",
            "master_lite.searcher",
        ),
        ("__import__('master_lite')\n", "master_lite"),
    ],
)
def test_every_import_form_is_checked(tree, source, target) -> None:
    repo = tree("harness/determined/experimental/_x.py", source)
    [problem] = import_violations(repo)
    assert f"imports {target}: the harness (determined) never imports" in problem


def test_the_master_may_import_only_the_harness_common_package(tree) -> None:
    tree(
        "master_lite/api/_a.py",
        "from determined.common import expconf\n"
        "import determined.common.api\n"
        "from determined import common\n",
    )
    repo = tree(
        "master_lite/scheduler/_b.py",
        "import determined\n"
        "def f():\n    import determined.exec\n"
        "from determined import __version__\n",
    )
    assert [p.split(": ")[0] for p in import_violations(repo)] == [
        "master_lite/scheduler/_b.py:1",
        "master_lite/scheduler/_b.py:3",
        "master_lite/scheduler/_b.py:4",
    ]


def test_relative_imports_are_resolved_against_the_package(tree) -> None:
    tree("master_lite/api/__init__.py", "from . import _base\nfrom ..store import Store\n")
    repo = tree("master_lite/api/_c.py", "from .._app import MasterLite\nfrom . import _base\n")
    assert import_violations(repo) == []
    found = imports_of(repo / "master_lite/api/_c.py", "master_lite.api._c", False)
    assert [i.target for i in found] == ["master_lite._app.MasterLite", "master_lite.api._base"]
    found = imports_of(repo / "master_lite/api/__init__.py", "master_lite.api", True)
    assert [i.target for i in found] == ["master_lite.api._base", "master_lite.store.Store"]


def test_the_jupyter_glue_may_not_import_private_harness_modules(tree) -> None:
    repo = tree(
        "jupyter_determined/_m.py",
        "import determined\n"
        "from determined.common import expconf\n"
        "from master_lite import MasterLite\n"
        "def f():\n"
        "    from determined.cli._experiment import x\n",
    )
    [problem] = import_violations(repo)
    assert problem.startswith(
        "jupyter_determined/_m.py:5: imports determined.cli._experiment.x: "
        "jupyter_determined may import determined only through its public"
    )
