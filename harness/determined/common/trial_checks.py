"""Submit-time checks of the Trial and Native APIs, shared by the clients and the master.

A Trial class entrypoint (`model_def:MnistTrial`, also after `--trial` in Determined's
launchers) or a Native `init()` config is checked when it is submitted, not ten seconds later in
a trial's log:

* the class must exist in the named module of the context: defined there or imported
  (`ast`, nothing of the user's code is imported), and when it visibly subclasses no Trial,
  the message names the Trial bases;
* a Trial or Native API that splits each batch over the slots (`TFKerasTrial`,
  `EstimatorTrial`, `det.experimental.keras/estimator.init()`, and a `PyTorchTrial` whose
  lengths count records or epochs) needs `hyperparameters.global_batch_size`, a positive int.

A Core API script (`python3 train.py`) is not checked. Each problem is one
`"dotted.path: message"` line, as config errors are (`expconf.validate`).
"""

from __future__ import annotations

import ast
import difflib
import re
import shlex
from collections.abc import Callable, Iterator
from typing import Any

# The Trial bases, by class name, and the API each means.
TRIAL_BASES: dict[str, str] = {
    "PyTorchTrial": "pytorch",
    "TFKerasTrial": "keras",
    "EstimatorTrial": "estimator",
    "DeepSpeedTrial": "deepspeed",
}
_BASE_OF_KIND = {kind: name for name, kind in TRIAL_BASES.items()}
_QUALIFIED = {
    "pytorch": "det.pytorch.PyTorchTrial",
    "keras": "det.keras.TFKerasTrial",
    "estimator": "det.estimator.EstimatorTrial",
    "deepspeed": "det.pytorch.deepspeed.DeepSpeedTrial",
}
# Native API configs record which API made them (`internal.native.api`).
NATIVE_APIS = ("keras", "estimator", "pytorch")
_CLASS_REF = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_]\w*)$")
# Bases that visibly are not a Trial: the class was meant as something else.
_NOT_TRIALS = {"object", "Module", "Model", "Sequential", "Layer", "Dataset", "Callback"}
# Where a PyTorchTrial's lengths need the batch size to become batches.
_LENGTH_FIELDS = (
    ("searcher", "max_length"),
    ("min_validation_period",),
    ("min_checkpoint_period",),
)
GBS = "hyperparameters.global_batch_size"

Reader = Callable[[str], "str | None"]


def trial_class_ref(config: dict) -> str | None:
    """The `module:Class` a config's entrypoint trains, or None (a script: Core API)."""
    entrypoint = config.get("entrypoint")
    if isinstance(entrypoint, str):
        if _CLASS_REF.match(entrypoint.strip()):
            return entrypoint.strip()
        try:
            words = shlex.split(entrypoint)
        except ValueError:
            return None
    elif isinstance(entrypoint, list) and all(isinstance(w, str) for w in entrypoint):
        words = list(entrypoint)
        if len(words) == 1 and _CLASS_REF.match(words[0]):
            return words[0]
    else:
        return None
    # Determined's launchers: `python3 -m determined.launch.torch_distributed --trial m:C`.
    if "--trial" in words:
        index = words.index("--trial")
        if index + 1 < len(words) and _CLASS_REF.match(words[index + 1]):
            return words[index + 1]
    return None


def native_api(config: dict) -> str | None:
    """The Native API that made this config (`internal.native.api`), or None."""
    internal = config.get("internal")
    native = internal.get("native") if isinstance(internal, dict) else None
    api = native.get("api") if isinstance(native, dict) else None
    return api if api in NATIVE_APIS else None


def _counts_records(config: dict) -> bool:
    for path in _LENGTH_FIELDS:
        value: Any = config
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, dict) and ("records" in value or "epochs" in value):
            return True
    return False


def batch_size_problems(config: dict, kind: str | None, what: str) -> list[str]:
    """`hyperparameters.global_batch_size` problems for a trial of API `kind`; `what` names
    the trial in the message (`"TFKerasTrial MnistTrial"`)."""
    if kind in ("keras", "estimator"):
        why = f"{what} splits each batch over the slots"
    elif kind == "pytorch" and _counts_records(config):
        why = f"{what} has lengths in records or epochs, which count batches of this size"
    else:
        return []
    hparams = config.get("hyperparameters")
    hparams = hparams if isinstance(hparams, dict) else {}
    if "global_batch_size" not in hparams:
        hint = ""
        close = difflib.get_close_matches(
            "global_batch_size", [k for k in hparams if isinstance(k, str)], n=1, cutoff=0.6
        )
        if close:
            hint = f" (did you mean {close[0]!r}? rename it to global_batch_size)"
        return [
            f"{GBS}: required: {why}; add e.g. `global_batch_size: 32` under hyperparameters{hint}"
        ]
    problem = _batch_size_value_problem(hparams["global_batch_size"])
    return [f"{GBS}: {problem} ({why})"] if problem else []


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _batch_size_value_problem(value: Any) -> str | None:
    if isinstance(value, dict) and "type" in value:  # a searched hyperparameter
        kind = value.get("type")
        if kind == "const":
            value = value.get("val")
        elif kind == "int":
            low = value.get("minval")
            if isinstance(low, int) and not isinstance(low, bool) and low < 1:
                return f"must be a positive integer; the int range starts at {low} (use minval: 1 or more)"
            return None
        elif kind == "categorical":
            bad = [v for v in value.get("vals") or [] if not _positive_int(v)]
            if bad:
                return f"must be a positive integer; the categorical values {bad!r} are not"
            return None
        else:
            return f"must be a positive integer, not a {kind!r} hyperparameter (use int, const or categorical)"
    if not _positive_int(value):
        return f"must be a positive integer, got {value!r}"
    return None


# ---------------------------------------------------------------------------------------------
# the class, from the context's source


def _module_source(read: Reader, module: str) -> tuple[str | None, str]:
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        text = read(candidate)
        if text is not None:
            return text, candidate
    return None, f"{base}.py"


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):  # Generic[T]-style bases
        return _dotted(node.value)
    return ""


def _names(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """Top-level names a module binds: classes, imports, assignments (also under if/try)."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.ClassDef):
            yield node.name, node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield (alias.asname or alias.name.split(".")[0]), node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node
        elif isinstance(node, (ast.If, ast.Try)):
            stack.extend(node.body)
            stack.extend(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                stack.extend(handler.body)


def _kind_of(tree: ast.Module, cls: ast.ClassDef, seen: frozenset[str]) -> str | None:
    """The Trial API `cls` visibly subclasses: "pytorch", ..., "none" (visibly none), or None
    (cannot tell: a base from another module)."""
    unknown = False
    for base in cls.bases:
        name = _dotted(base).rsplit(".", 1)[-1]
        if name in TRIAL_BASES:
            return TRIAL_BASES[name]
        local = dict(_names(tree)).get(name)
        if isinstance(local, ast.ClassDef) and name not in seen:
            kind = _kind_of(tree, local, seen | {name})
            if kind != "none":
                return kind
        elif name not in _NOT_TRIALS:
            unknown = True
    return None if unknown else "none"


def class_problems(read: Reader, ref: str) -> tuple[list[str], str | None]:
    """Whether `module:Class` exists in the context `read` gives files of; (problems, kind).

    `kind` is the Trial API the class visibly subclasses, None when that cannot be told (the
    class is imported, or its base comes from elsewhere).
    """
    module, _, name = ref.partition(":")
    source, path = _module_source(read, module)
    where = f"entrypoint: {ref}"
    if source is None:
        return [
            f"{where}: no module {module!r} in the context (looked for {path} and "
            f"{module.replace('.', '/')}/__init__.py); check the module name and the context "
            "directory you submit"
        ], None
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        return [f"{where}: {path} line {exc.lineno}: syntax error: {exc.msg}"], None
    bound = dict(_names(tree))
    node = bound.get(name)
    if node is None and "*" in bound:
        return [], None  # `from x import *` may bring it: what it is shows when it runs
    if node is None:
        classes = [n for n, v in bound.items() if isinstance(v, ast.ClassDef)]
        close = difflib.get_close_matches(name, classes, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listed = ", ".join(sorted(classes)) or "none"
        return [
            f"{where}: {path} defines or imports no {name!r}{hint}; classes there: {listed}"
        ], None
    if not isinstance(node, ast.ClassDef):
        return [], None  # imported or assigned: it exists; what it is shows when it runs
    kind = _kind_of(tree, node, frozenset({name}))
    if kind == "none":
        bases = ", ".join(_dotted(b) for b in node.bases) or "no base class"
        trials = ", ".join(_QUALIFIED.values())
        return [
            f"{where}: class {name} in {path} (line {node.lineno}) subclasses {bases}, not a "
            f"Trial: make it subclass the one of its framework ({trials})"
        ], None
    return [], kind


def trial_api_problems(config: dict, read: Reader | None) -> list[str]:
    """Every submit-time problem of a Trial or Native API config (none for a Core API script).

    Args:
        config: the experiment config (as submitted or expanded).
        read: gives a context file's text by its relative path (None: not there); None when
            the context is not at hand (only the config is checked).
    """
    api = native_api(config)
    if api is not None:
        return batch_size_problems(config, api, f"det.experimental.{api} (Native API)")
    ref = trial_class_ref(config)
    if ref is None:
        return []
    problems: list[str] = []
    kind: str | None = None
    if read is not None:
        problems, kind = class_problems(read, ref)
    if kind is not None:
        what = f"{_BASE_OF_KIND[kind]} {ref.partition(':')[2]}"
        problems += batch_size_problems(config, kind, what)
    return problems


def directory_reader(root: Any, includes: Any = ()) -> Reader:
    """A `Reader` over a context directory (or a single-file context) and its `-i` includes,
    each at the top level under its own name (as `context.pack` lays them out)."""
    import pathlib

    tops = [pathlib.Path(root), *(pathlib.Path(i) for i in includes)]

    def read(relpath: str) -> str | None:
        head, _, rest = relpath.partition("/")
        for index, top in enumerate(tops):
            if top.is_file():
                path = top if top.name == relpath else None
            elif index == 0:
                path = top / relpath
            else:  # an included directory lands under its name
                path = top / rest if top.resolve().name == head and rest else None
            if path is not None and path.is_file():
                return path.read_text("utf-8", "replace")
        return None

    return read


def tarball_reader(data: bytes, limit_bytes: int) -> Reader:
    """A `Reader` over a context tar.gz: reads only the member asked for (a `.py` file), at
    most `limit_bytes` of it; an unreadable archive reads as empty (its own check names it)."""
    import io
    import tarfile

    def read(relpath: str) -> str | None:
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                for member in tar:
                    name = member.name[2:] if member.name.startswith("./") else member.name
                    if member.isreg() and name == relpath:
                        stream = tar.extractfile(member)
                        if stream is None:
                            return None
                        return stream.read(limit_bytes).decode("utf-8", "replace")
        except (tarfile.TarError, OSError, EOFError):
            return None
        return None

    return read


__all__ = [
    "GBS",
    "NATIVE_APIS",
    "TRIAL_BASES",
    "batch_size_problems",
    "class_problems",
    "directory_reader",
    "native_api",
    "tarball_reader",
    "trial_api_problems",
    "trial_class_ref",
]
