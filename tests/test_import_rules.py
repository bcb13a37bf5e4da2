"""Who may import whom (docs: /work/shared/design/ARCHITECTURE.md, "Who may import whom").

    jupyter_determined  -->  master_lite, determined (its public modules)
    master_lite         -->  determined.common only (config schema, shared enums, storage layout)
    determined          -->  neither master_lite nor jupyter_determined (HTTP only to the master)

Inside master_lite (docs/internals.md, "The Master's parts"): the runners never import the parts,
the searchers never import the experiments, the API never imports the store, and no module
reaches itself through its imports (no import circle, `TYPE_CHECKING` and function-level imports
included).

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


# The master's parts: one package each, plus what they share and the facade that wires them.
MASTER_PARTS = (
    "master_lite._core",
    "master_lite._master",
    "master_lite.checkpoints",
    "master_lite.experiments",
    "master_lite.models",
    "master_lite.reports",
    "master_lite.runs",
    "master_lite.tensorboards",
    "master_lite.unmanaged",
    "master_lite.users",
    "master_lite.workspaces",
)
# The runners' package (`scheduler` until it becomes `runners`): both names are held to the rule.
RUNNER_PACKAGES = ("master_lite.runners", "master_lite.scheduler")
# importer package -> (packages it may not import, why)
INNER_RULES: dict[str, tuple[tuple[str, ...], str]] = {
    **{
        runners: (
            MASTER_PARTS + ("master_lite.api", "master_lite.store"),
            "the runners never import the master's parts (they start and stop processes; the "
            "runs part calls them through the Runner seam and hears exits by callback)",
        )
        for runners in RUNNER_PACKAGES
    },
    "master_lite.searcher": (
        MASTER_PARTS + ("master_lite.api", "master_lite.store"),
        "the searchers never import the experiments (or any part): they answer events with "
        "operations that the experiments part applies",
    ),
    "master_lite.api": (
        ("master_lite.store",),
        "the API never imports the store: handlers call the Master facade and its parts",
    ),
}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def broken_inner_rule(importer: str, target: str) -> str | None:
    """Why module `importer` of master_lite may not import `target`, or None if it may."""
    for package, (forbidden, why) in INNER_RULES.items():
        if _within(importer, package) and any(_within(target, f) for f in forbidden):
            return why
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
                rule = broken_rule(package, found.target) or (
                    broken_inner_rule(module, found.target) if package == "master_lite" else None
                )
                if rule:
                    problems.append(
                        (str(path.relative_to(repo)), found.line, f"imports {found.target}: {rule}")
                    )
    return [f"{path}:{line}: {text}" for path, line, text in sorted(problems)]


def test_the_packages_import_only_what_the_architecture_allows() -> None:
    problems = import_violations()
    assert not problems, "imports that break the rules in ARCHITECTURE.md:\n" + "\n".join(problems)


def import_graph(package: str, package_dir: Path) -> dict[str, set[str]]:
    """module -> the modules of `package` that importing it runs, from every import it has.

    Importing `a.b.c` runs `a/__init__`, `a/b/__init__` and `a/b/c`: an import names the
    module it reaches and the packages above it, except those above the importer itself
    (they are already importing when it runs)."""
    files = {module_name(package, package_dir, path): path for path in python_files(package_dir)}
    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        own_packages = module.split(".") if is_package else module.split(".")[:-1]
        above_importer = {".".join(own_packages[:i]) for i in range(1, len(own_packages) + 1)}
        for found in imports_of(path, module, is_package):
            parts = found.target.split(".")
            # `from a.b import c` names module a.b.c or name c of a.b: the longest module wins.
            reached = next(
                (
                    ".".join(parts[:i])
                    for i in range(len(parts), 0, -1)
                    if ".".join(parts[:i]) in files
                ),
                None,
            )
            if reached is None:
                continue
            reached_parts = reached.split(".")
            for i in range(1, len(reached_parts) + 1):
                name = ".".join(reached_parts[:i])
                if name != module and name not in above_importer and name in files:
                    graph[module].add(name)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


# Circles allowed for now, listed exactly so that a new one still fails (none today).
KNOWN_CIRCLES: list[list[str]] = []


def test_no_import_circle_inside_the_master() -> None:
    graph = import_graph("master_lite", REPO / PACKAGES["master_lite"])
    circles = [c for c in import_circles(graph) if c not in KNOWN_CIRCLES]
    assert not circles, "modules of master_lite that import each other in a circle:\n" + "\n".join(
        " -> ".join(circle) for circle in circles
    )


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
    tree("master_lite/api/__init__.py", "from . import _base\nfrom ..errors import NotFound\n")
    repo = tree("master_lite/api/_c.py", "from .._app import MasterLite\nfrom . import _base\n")
    assert import_violations(repo) == []
    found = imports_of(repo / "master_lite/api/_c.py", "master_lite.api._c", False)
    assert [i.target for i in found] == ["master_lite._app.MasterLite", "master_lite.api._base"]
    found = imports_of(repo / "master_lite/api/__init__.py", "master_lite.api", True)
    assert [i.target for i in found] == ["master_lite.api._base", "master_lite.errors.NotFound"]


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


def test_an_import_circle_is_found_through_type_checking_and_package_inits(tree) -> None:
    tree("master_lite/store/__init__.py", "from ._store import Store\n")
    tree("master_lite/store/_store.py", "from . import _rows\n")
    tree(
        "master_lite/store/_rows.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._store import Store\n",
    )
    tree("master_lite/runs/__init__.py", "from master_lite.runs._runs import Runs\n")
    tree("master_lite/runs/_runs.py", "from master_lite.experiments._views import Views\n")
    tree("master_lite/experiments/__init__.py", "from master_lite.experiments._x import X\n")
    repo = tree("master_lite/experiments/_x.py", "from master_lite.runs import Runs\n")
    circles = import_circles(import_graph("master_lite", repo / "master_lite"))
    assert circles == [
        [
            "master_lite.experiments",
            "master_lite.experiments._x",
            "master_lite.runs",
            "master_lite.runs._runs",
        ],
        ["master_lite.store._rows", "master_lite.store._store"],
    ]


def test_a_module_importing_its_own_package_init_is_no_circle(tree) -> None:
    tree("master_lite/runs/__init__.py", "from master_lite.runs._runs import Runs\n")
    repo = tree("master_lite/runs/_runs.py", "from master_lite.runs._env import x\n")
    tree("master_lite/runs/_env.py", "x = 1\n")
    assert import_circles(import_graph("master_lite", repo / "master_lite")) == []


@pytest.mark.parametrize(
    "importer, source",
    [
        ("master_lite/runners/_process.py", "from master_lite.runs import Runs\n"),
        ("master_lite/scheduler/_local.py", "from master_lite.experiments import Experiments\n"),
        ("master_lite/runners/kernel/_k.py", "from master_lite._core import MasterState\n"),
        ("master_lite/searcher/_asha.py", "from master_lite.experiments import Experiments\n"),
        ("master_lite/searcher/_x.py", "def f():\n    import master_lite.experiments._y\n"),
        ("master_lite/api/_models.py", "from master_lite.store import MODEL_ORDERS\n"),
        ("master_lite/api/_base.py", "from ..store import Store\n"),
    ],
)
def test_the_inner_rules_of_the_master_are_checked(tree, importer, source) -> None:
    [problem] = import_violations(tree(importer, source))
    assert problem.startswith(importer + ":")


def test_the_parts_may_import_the_runners_and_the_api_the_parts(tree) -> None:
    tree("master_lite/runs/_runs.py", "from master_lite.runners import Runner\n")
    tree("master_lite/api/_schemas.py", "from master_lite.experiments import EXPERIMENT_ACTIONS\n")
    repo = tree("master_lite/searcher/_ops.py", "from master_lite.searcher._trials import T\n")
    assert import_violations(repo) == []
